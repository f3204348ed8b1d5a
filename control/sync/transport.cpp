// SPDX-License-Identifier: Apache-2.0
#include "control/sync/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <spdlog/spdlog.h>
#include <stdexcept>

namespace egw::sync {

namespace {

constexpr std::chrono::milliseconds kTickEvery{100};
constexpr std::chrono::milliseconds kKeyPollEvery{1000};
constexpr std::chrono::milliseconds kReceiveWait{5};
constexpr size_t kDrainBatch = 256;
constexpr size_t kReceiveBatch = 64;  // datagrams read before the rings are drained again

std::string describe(const std::string& host, uint16_t port) {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

socklen_t length_of(const sockaddr_storage& a) {
    return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// Never repeats across restarts of this gateway as long as its clock does not go back: the
// replay window of every peer stays valid (docs/architecture.md, "Authentication").
uint64_t first_counter() {
    auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
    return static_cast<uint64_t>(us.count());
}

EndpointConfig endpoint_config(const SyncServiceConfig& c) {
    EndpointConfig e;
    e.self = c.self;
    e.boot = static_cast<uint32_t>(std::random_device{}());
    e.first_counter = first_counter();
    for (const SyncPeer& p : c.peers)
        e.peers.push_back(p.id);
    return e;
}

}  // namespace

sockaddr_storage socket_address(const std::string& host, uint16_t port) {
    sockaddr_storage ss{};
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
    } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
    } else {
        throw std::invalid_argument("sync: \"" + host + "\" is not an IP address");
    }
    return ss;
}

UdpSocket::UdpSocket(const std::string& host, uint16_t port) {
    sockaddr_storage addr = socket_address(host, port);
    fd_ = ::socket(addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("sync: socket: " + std::string(std::strerror(errno)));
    // Room for a burst of the workers' events and a bulk window while the sync thread is busy:
    // the kernel's default (about 200 KB, some 90 datagrams of 1,440 bytes) overflows at the
    // first stall, and every loss costs a NACK round. FORCE lifts rmem_max for a privileged
    // egwd; without the privilege the plain request is capped, which is still correct.
    int rcvbuf = 4 << 20;
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), length_of(addr)) != 0) {
        int err = errno;
        ::close(fd_);
        throw std::runtime_error("sync: cannot listen on " + describe(host, port) + ": " + std::strerror(err));
    }
}

UdpSocket::~UdpSocket() {
    if (fd_ >= 0) ::close(fd_);
}

bool UdpSocket::send_to(const sockaddr_storage& to, std::span<const uint8_t> bytes) {
    ssize_t n =
        ::sendto(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), length_of(to));
    return n == static_cast<ssize_t>(bytes.size());
}

std::optional<size_t> UdpSocket::receive(std::span<uint8_t> buf, std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    // MSG_TRUNC: the real length of a datagram larger than the buffer, which the decoder refuses.
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) return std::nullopt;
    return std::min(static_cast<size_t>(n), buf.size());
}

uint16_t UdpSocket::local_port() const {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

size_t events_per_datagram(unsigned mtu) {
    constexpr size_t kIpUdp = 20 + 8;
    if (mtu < kIpUdp + datagram_size(1)) return 1;
    return std::min((mtu - kIpUdp - datagram_size(0)) / kEventSize, kMaxEventsPerDatagram);
}

Event to_wire(const dp::SyncEvent& e, uint64_t now_tsc, uint64_t tsc_hz, uint32_t epoch) {
    Event w;
    w.kind = static_cast<EventKind>(e.kind);
    w.family = e.family;
    w.protocol = e.proto;
    w.tcp_state = e.proto == 6 ? static_cast<uint8_t>(e.tcp_seen & kTcpKnownBits) : 0;
    w.vrf = e.vrf;
    uint64_t left = e.expires_tsc > now_tsc ? e.expires_tsc - now_tsc : 0;
    uint64_t ms = tsc_hz ? left / (tsc_hz / 1000 ? tsc_hz / 1000 : 1) : 0;
    w.time_left_ms = static_cast<uint32_t>(std::min<uint64_t>(ms, UINT32_MAX));
    w.service_epoch = epoch;
    auto address = [&](const uint8_t* a) {
        Address out{};
        if (e.family == 4) {
            out[10] = out[11] = 0xff;
            std::memcpy(out.data() + 12, a, 4);
        } else {
            std::memcpy(out.data(), a, 16);
        }
        return out;
    };
    w.inside = {address(e.inside_addr), ntohs(e.inside_port)};
    w.outside = {address(e.outside_addr), ntohs(e.outside_port)};
    w.remote = {address(e.remote_addr), ntohs(e.remote_port)};
    return w;
}

SyncService::SyncService(SyncServiceConfig cfg, std::vector<dp::SyncEventRing*> rings)
    : cfg_(std::move(cfg)),
      rings_(std::move(rings)),
      keys_(read_key_file(cfg_.key_file)),
      key_file_(cfg_.key_file, keys_),
      endpoint_(endpoint_config(cfg_), keys_),
      socket_(cfg_.listen_host, cfg_.listen_port),
      standby_(cfg_.standby_max_sessions) {
    for (const SyncPeer& p : cfg_.peers)
        peer_addresses_[p.id] = socket_address(p.host, p.port);
}

SyncService::~SyncService() {
    stop();
}

void SyncService::start() {
    if (running_.exchange(true)) return;
    thread_ = std::thread([this] { run(); });
}

void SyncService::stop() {
    running_.store(false);
    if (thread_.joinable()) thread_.join();
}

SyncServiceStats SyncService::stats() const {
    std::lock_guard lock(stats_mutex_);
    SyncServiceStats s = stats_;
    s.ring_drops = 0;
    for (const dp::SyncEventRing* r : rings_)
        s.ring_drops += r->dropped();
    return s;
}

std::string address_text(const Address& a) {
    char text[INET6_ADDRSTRLEN] = "";
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(a.data(), kMapped, 12) == 0)
        inet_ntop(AF_INET, a.data() + 12, text, sizeof text);
    else
        inet_ntop(AF_INET6, a.data(), text, sizeof text);
    return text;
}

void SyncService::queue_bulk(std::vector<Event> events) {
    size_t n = events.size();
    {
        std::lock_guard lock(bulk_mutex_);
        if (bulk_at_ == bulk_.size()) {
            bulk_ = std::move(events);
            bulk_at_ = 0;
        } else {
            bulk_.insert(bulk_.end(), events.begin(), events.end());
        }
        bulk_end_due_ = true;
    }
    std::lock_guard lock(stats_mutex_);
    stats_.bulk_queued += n;
}

// Sync thread: as many bulk datagrams as every peer's window has room for; returns the events sent.
size_t SyncService::send_bulk(size_t per_datagram, Clock::time_point now) {
    size_t window = std::max<size_t>(1, SyncService::kBulkWindowBytes / datagram_size(per_datagram));
    size_t room = window;
    for (const SyncPeer& p : cfg_.peers)
        if (const Link* link = endpoint_.link(p.id))
            room = std::min(room, window > link->unacknowledged() ? window - link->unacknowledged() : 0);
    if (room == 0) return 0;
    std::vector<Event> chunk;
    bool end = false;
    {
        std::lock_guard lock(bulk_mutex_);
        size_t n = std::min(room * per_datagram, bulk_.size() - bulk_at_);
        end = bulk_end_due_ && bulk_at_ + n == bulk_.size();
        if (end) bulk_end_due_ = false;
        if (n == 0 && !end) return 0;
        chunk.assign(bulk_.begin() + static_cast<std::ptrdiff_t>(bulk_at_),
                     bulk_.begin() + static_cast<std::ptrdiff_t>(bulk_at_ + n));
        bulk_at_ += n;
        if (bulk_at_ == bulk_.size()) {
            bulk_.clear();
            bulk_.shrink_to_fit();
            bulk_at_ = 0;
        }
    }
    if (!chunk.empty()) send_all(endpoint_.send(chunk, per_datagram, now));
    if (end) {
        // After the dump's last datagram: its sequence number is the end's.
        std::vector<Outgoing> out;
        for (const SyncPeer& p : cfg_.peers)
            out.push_back(endpoint_.control(p.id, kFlagBulkEnd, now));
        send_all(out);
    }
    std::lock_guard lock(stats_mutex_);
    stats_.bulk_sent += chunk.size();
    stats_.events_out += chunk.size();
    stats_.bulk_dumps_ended += end;
    return chunk.size();
}

bool SyncService::bulk_complete() const {
    std::lock_guard lock(stats_mutex_);
    if (stats_.peers.size() != cfg_.peers.size()) return false;  // before the first tick
    for (const SyncPeerStatus& p : stats_.peers)
        if (p.alive && !p.bulk_complete) return false;
    return true;
}

void SyncService::set_port_stats(uint64_t reserved, uint64_t conflicts) {
    std::lock_guard lock(stats_mutex_);
    stats_.reserved_ports = reserved;
    stats_.port_conflicts = conflicts;
}

// Sync thread, every tick: the peers' links and the standby table into the stats, and a log
// line when a peer comes or goes (once per change, not per keep-alive).
void SyncService::refresh_status(Clock::time_point now) {
    std::vector<SyncPeerStatus> peers;
    for (const SyncPeer& p : cfg_.peers) {
        const Link* link = endpoint_.link(p.id);
        if (!link) continue;
        SyncPeerStatus st;
        st.id = p.id;
        st.address =
            (p.host.find(':') != std::string::npos ? "[" + p.host + "]" : p.host) + ":" + std::to_string(p.port);
        st.alive = link->peer_alive(now);
        if (link->last_heard()) st.since_heard_s = std::chrono::duration<double>(now - *link->last_heard()).count();
        st.unacknowledged = link->unacknowledged();
        st.link = link->stats();
        st.bulk_complete = link->bulk_complete();
        bool& was = peer_alive_[p.id];
        bool came_up = st.alive && !was;
        // A peer that is up and whose dump this gateway lacks is asked for one: when it comes
        // up (this gateway starting, or the two meeting again), and again if no dump arrives.
        auto asked = bulk_asked_.find(p.id);
        if (st.alive &&
            (came_up || (!st.bulk_complete && (asked == bulk_asked_.end() || now - asked->second >= kBulkRetry)))) {
            send_all({endpoint_.control(p.id, kFlagBulkRequest, now)});
            bulk_asked_[p.id] = now;
            st.bulk_complete = false;
            std::lock_guard lock(stats_mutex_);
            ++stats_.bulk_requests_sent;
        }
        if (st.alive != was) {
            was = st.alive;
            if (st.alive)
                spdlog::info("session sync: peer {} ({}) is up", p.id, st.address);
            else
                spdlog::warn("session sync: peer {} ({}) is down: not heard for {:.1f} s", p.id, st.address,
                             st.since_heard_s);
        }
        peers.push_back(std::move(st));
    }
    size_t sessions, max;
    StandbyStats standby;
    std::map<Address, size_t> per_service;
    {
        std::lock_guard lock(standby_mutex_);
        standby_.age(now);
        standby_version_.store(standby_.version(), std::memory_order_release);
        sessions = standby_.size();
        max = standby_.max_sessions();
        standby = standby_.stats();
        per_service = standby_.per_service();
    }
    std::lock_guard lock(stats_mutex_);
    stats_.peers = std::move(peers);
    stats_.standby_sessions = sessions;
    stats_.standby_max = max;
    stats_.standby = standby;
    stats_.standby_per_service = std::move(per_service);
}

void SyncService::with_standby(const std::function<void(const StandbyTable&)>& read) const {
    std::lock_guard lock(standby_mutex_);
    read(standby_);
}

void SyncService::send_all(const std::vector<Outgoing>& out) {
    uint64_t sent = 0, bytes = 0, errors = 0;
    for (const Outgoing& o : out) {
        auto it = peer_addresses_.find(o.peer);
        if (it != peer_addresses_.end() && socket_.send_to(it->second, o.bytes)) {
            ++sent;
            bytes += o.bytes.size();
        } else {
            ++errors;
        }
    }
    std::lock_guard lock(stats_mutex_);
    stats_.datagrams_out += sent;
    stats_.bytes_out += bytes;
    stats_.send_errors += errors;
}

void SyncService::drain(std::vector<Event>& pending) {
    dp::SyncEvent batch[kDrainBatch];
    uint64_t now = cfg_.tsc ? cfg_.tsc() : 0;
    for (dp::SyncEventRing* ring : rings_) {
        size_t n;
        while ((n = ring->pop(batch, kDrainBatch)) > 0) {
            for (size_t i = 0; i < n; ++i) {
                uint32_t epoch = cfg_.epoch_of ? cfg_.epoch_of(batch[i].service_id) : 0;
                pending.push_back(to_wire(batch[i], now, cfg_.tsc_hz, epoch));
            }
        }
    }
}

void SyncService::run() {
    const size_t per_datagram = events_per_datagram(cfg_.mtu);
    std::vector<Event> pending;
    // One byte more than the length field can say: a longer datagram arrives cut to this size and
    // is refused for its length.
    std::vector<uint8_t> buf(65536);
    auto last_tick = Clock::now(), last_key_poll = Clock::now(), oldest_pending = Clock::now();
    while (running_.load(std::memory_order_relaxed)) {
        auto now = Clock::now();
        bool was_empty = pending.empty();
        drain(pending);
        if (was_empty && !pending.empty()) oldest_pending = now;
        // Full datagrams leave at once; a partial one after flush_after, so the lag stays bounded
        // when the workers are quiet.
        size_t full = pending.size() / per_datagram * per_datagram;
        if (!pending.empty() && now - oldest_pending >= cfg_.flush_after) full = pending.size();
        if (full) {
            send_all(endpoint_.send(std::span<const Event>(pending.data(), full), per_datagram, now));
            {
                std::lock_guard lock(stats_mutex_);
                stats_.events_out += full;
            }
            pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(full));
            oldest_pending = now;
        }
        // A dump goes after the workers' events, paced by the peers' acknowledgements; while it
        // lasts the receive does not wait, since those acknowledgements are what it waits for.
        bool bulk_busy = send_bulk(per_datagram, now) > 0;
        // Whatever has queued up, then back to the rings: the wait is only for the first one.
        auto wait = bulk_busy ? std::chrono::milliseconds(0) : kReceiveWait;
        for (size_t k = 0; k < kReceiveBatch; ++k, wait = std::chrono::milliseconds(0)) {
            auto n = socket_.receive(buf, wait);
            if (!n) break;
            auto r = endpoint_.receive(std::span<const uint8_t>(buf.data(), *n), Clock::now());
            {
                std::lock_guard lock(stats_mutex_);
                stats_.refused = endpoint_.refusals();
                if (r.accepted) {
                    ++stats_.datagrams_in;
                    stats_.bytes_in += *n;
                    stats_.events_in += r.events.size();
                }
            }
            if (r.accepted && endpoint_.take_bulk_request(r.peer)) {
                bulk_wanted_.store(true);
                std::lock_guard lock(stats_mutex_);
                ++stats_.bulk_requests_received;
            }
            if (r.accepted && !r.events.empty()) {
                {
                    std::lock_guard lock(standby_mutex_);
                    standby_.apply(r.peer, r.events, Clock::now());
                    standby_version_.store(standby_.version(), std::memory_order_release);
                }
                if (cfg_.on_events) cfg_.on_events(r.peer, r.events);
            }
            send_all(r.replies);
        }
        now = Clock::now();
        if (now - last_tick >= kTickEvery) {
            last_tick = now;
            send_all(endpoint_.tick(now));
            refresh_status(now);
        }
        if (now - last_key_poll >= kKeyPollEvery) {
            last_key_poll = now;
            key_file_.poll(now);
            std::lock_guard lock(stats_mutex_);
            stats_.key_error = key_file_.error();
        }
    }
}

}  // namespace egw::sync
