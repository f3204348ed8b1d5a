// SPDX-License-Identifier: Apache-2.0
//
// The sync thread: drains the workers' event rings (dataplane/sync_events.h) into signed
// datagrams for every peer and receives theirs, over a kernel UDP socket on the sync network.
// A kernel socket and not a DPDK port: sync is a few thousand datagrams a second on the
// management network, which the kernel handles at no cost to the workers, and it keeps working
// whatever state the data-plane ports are in (docs/operations.md, "Session sync").
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/sync/auth.h"
#include "control/sync/endpoint.h"
#include "control/sync/standby.h"
#include "control/sync/wire.h"
#include "dataplane/sync_events.h"

namespace egw::sync {

// host: an IPv4 or IPv6 literal. Throws std::invalid_argument for anything else.
sockaddr_storage socket_address(const std::string& host, uint16_t port);

class UdpSocket {
public:
    // Bound to host:port. Throws std::runtime_error naming the address and the reason.
    UdpSocket(const std::string& host, uint16_t port);
    ~UdpSocket();
    UdpSocket(const UdpSocket&) = delete;
    UdpSocket& operator=(const UdpSocket&) = delete;

    bool send_to(const sockaddr_storage& to, std::span<const uint8_t> bytes);
    // A datagram, waiting up to `timeout`; nullopt when none came.
    std::optional<size_t> receive(std::span<uint8_t> buf, std::chrono::milliseconds timeout);
    uint16_t local_port() const;

private:
    int fd_ = -1;
};

struct SyncPeer {
    uint32_t id = 0;
    std::string host;
    uint16_t port = 0;
};

struct SyncServiceConfig {
    uint32_t self = 0;
    std::string listen_host;
    uint16_t listen_port = 0;  // 0: any (tests)
    std::string key_file;
    std::vector<SyncPeer> peers;
    unsigned mtu = 1500;
    // How long drained events may wait for more before a partial datagram leaves.
    std::chrono::milliseconds flush_after{20};
    // The workers' TSC and its rate, to turn an expiry into time left.
    std::function<uint64_t()> tsc;
    uint64_t tsc_hz = 1;
    // The assignment epoch of a Service id (0 until the standby work gives it meaning).
    std::function<uint32_t(uint32_t)> epoch_of;
    // Sessions the standby table holds at most (standby.h).
    size_t standby_max_sessions = 1000000;
    // New events from a peer, after the standby table took them (called on the sync thread).
    std::function<void(uint32_t peer, std::span<const Event>)> on_events;
};

// One peer as the sync thread saw it at its last tick (every 100 ms).
struct SyncPeerStatus {
    uint32_t id = 0;
    std::string address;         // host:port
    bool alive = false;          // heard within three keep-alive intervals
    double since_heard_s = -1;   // -1: never heard
    size_t unacknowledged = 0;   // datagrams kept for resending
    bool bulk_complete = false;  // its dump has arrived whole since this gateway asked for it
    LinkStats link;
};

// What `show sync` and the metrics read; safe from any thread.
struct SyncServiceStats {
    uint64_t events_out = 0, events_in = 0, datagrams_out = 0, datagrams_in = 0, bytes_out = 0, bytes_in = 0;
    uint64_t send_errors = 0;
    uint64_t ring_drops = 0;  // events the workers dropped on a full ring
    std::array<uint64_t, kRefusalCount> refused{};
    std::optional<std::string> key_error;
    std::vector<SyncPeerStatus> peers;  // in configuration order
    // The standby table at the last tick.
    size_t standby_sessions = 0, standby_max = 0;
    StandbyStats standby;
    std::map<Address, size_t> standby_per_service;
    // The control thread's reserved ports (set_port_stats).
    uint64_t reserved_ports = 0, port_conflicts = 0;
    // Bulk events queued (queue_bulk) and sent; dumps asked of the peers, asked by them, ended.
    uint64_t bulk_queued = 0, bulk_sent = 0;
    uint64_t bulk_requests_sent = 0, bulk_requests_received = 0, bulk_dumps_ended = 0;
};

// An address of the wire (IPv4-mapped or IPv6) as text.
std::string address_text(const Address& a);

// Events per datagram for a link MTU (IPv4 and UDP headers taken off; IPv6's are larger, and the
// kernel fragments what does not fit rather than losing it).
size_t events_per_datagram(unsigned mtu);

// Turns a worker's event into the wire's: time left from the TSC expiry, addresses IPv4-mapped.
Event to_wire(const dp::SyncEvent& e, uint64_t now_tsc, uint64_t tsc_hz, uint32_t epoch);

class SyncService {
public:
    // Reads the key file and binds the socket; throws std::runtime_error naming what failed.
    SyncService(SyncServiceConfig cfg, std::vector<dp::SyncEventRing*> rings);
    ~SyncService();
    void start();
    void stop();
    SyncServiceStats stats() const;
    // The standby table, read under the sync thread's lock (keep `read` short: events wait).
    void with_standby(const std::function<void(const StandbyTable&)>& read) const;
    // Events to send to every peer in bulk (a dump of this gateway's sessions): queued here and
    // sent by the sync thread after the workers' events, no faster than the peers acknowledge
    // (kBulkWindowBytes in flight per peer), so that a dump does not overrun their sockets.
    // A dump ends with an end marker to every peer once its last event has gone: queue a whole
    // dump in one call.
    void queue_bulk(std::vector<Event> events);
    // Whether a peer has asked for a dump since the last call (the control thread answers with
    // queue_bulk() of this gateway's sessions).
    bool take_bulk_request() { return bulk_wanted_.exchange(false); }
    // Whether every peer that is up has sent its whole dump since this gateway asked (as of the
    // last tick): the seam for keeping a gateway out of a Service's election until then. A
    // peer's dump holds all its Services, so this is per peer, not per Service.
    bool bulk_complete() const;
    // How long a request waits for its dump before it is sent again.
    static constexpr std::chrono::seconds kBulkRetry{10};
    static constexpr size_t kBulkWindowBytes = 128 * 1024;
    // What the control thread reserved in the workers and found in conflict (`show sync`).
    void set_port_stats(uint64_t reserved, uint64_t conflicts);
    // StandbyTable::version(), without the table.
    uint64_t standby_version() const { return standby_version_.load(std::memory_order_acquire); }
    uint16_t local_port() const { return socket_.local_port(); }

private:
    void run();
    void send_all(const std::vector<Outgoing>& out);
    void drain(std::vector<Event>& pending);
    void refresh_status(Clock::time_point now);
    size_t send_bulk(size_t per_datagram, Clock::time_point now);

    SyncServiceConfig cfg_;
    std::vector<dp::SyncEventRing*> rings_;
    KeyRing keys_;
    KeyFile key_file_;
    SyncEndpoint endpoint_;
    UdpSocket socket_;
    std::map<uint32_t, sockaddr_storage> peer_addresses_;
    std::map<uint32_t, bool> peer_alive_;  // as last logged (sync thread)
    std::atomic<bool> running_{false};
    std::thread thread_;
    mutable std::mutex stats_mutex_;
    SyncServiceStats stats_;
    mutable std::mutex standby_mutex_;
    StandbyTable standby_;
    std::atomic<uint64_t> standby_version_{0};
    std::mutex bulk_mutex_;
    std::vector<Event> bulk_;  // queued; sent from bulk_at_
    size_t bulk_at_ = 0;
    bool bulk_end_due_ = false;  // an end marker follows the queue's last event
    std::atomic<bool> bulk_wanted_{false};
    std::map<uint32_t, Clock::time_point> bulk_asked_;  // sync thread: when each peer was asked
};

}  // namespace egw::sync
