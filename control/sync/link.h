// SPDX-License-Identifier: Apache-2.0
//
// The reliability of session sync between this gateway and one peer, as conntrackd's FT-FW does
// it: every datagram with events takes the next sequence number and stays in a bounded resend
// buffer until the peer acknowledges it; the receiver acknowledges cumulatively (piggybacked on
// whatever it sends, and on its own after kAckEvery in-order datagrams), asks for gaps with a
// negative acknowledgement, and learns of a lost tail from the keep-alive every second, which
// carries the last sequence number sent. What the resend buffer no longer holds is announced
// LOST, so the receiver counts it and moves on instead of asking forever (bulk sync repairs it).
//
// A pure state machine: no sockets, no threads, no clock of its own (every call takes `now`), so
// the tests drive loss, reordering and time exactly. Datagrams reach receive() only after their
// tag has been verified (endpoint.h); the replay window lives here because it is per sender.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

#include "control/sync/auth.h"
#include "control/sync/wire.h"

namespace egw::sync {

struct LinkConfig {
    uint32_t self = 0;  // this gateway's id
    uint32_t peer = 0;  // the peer's id
    uint32_t boot = 0;  // this gateway's boot id (header.boot)
    // The first replay counter: the wall clock in microseconds at start, so that a restarted
    // sender's counters are still above everything it sent before (endpoint.cpp).
    uint64_t first_counter = 1;
    size_t resend_capacity = 1024;  // datagrams kept for resending
    uint32_t ack_every = 32;        // in-order datagrams before an acknowledgement of its own
    std::chrono::milliseconds keepalive{1000};
    std::chrono::milliseconds nack_retry{200};  // how soon an unanswered NACK is repeated
};

// Upper bounds of the acknowledgement lag's buckets (LinkStats::ack_lag), in seconds; one more
// bucket holds the rest.
inline constexpr std::array<double, 11> kAckLagBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1.0,  2.5};

struct LinkStats {
    uint64_t datagrams_sent = 0, events_sent = 0, keepalives_sent = 0, acks_sent = 0, nacks_sent = 0;
    uint64_t resent = 0;          // datagrams sent again for a NACK
    uint64_t lost_announced = 0;  // sequence numbers NACKed that the resend buffer no longer held
    uint64_t evicted = 0;         // unacknowledged datagrams pushed out of a full resend buffer
    uint64_t datagrams_received = 0, events_received = 0;
    uint64_t duplicates = 0;     // authentic, fresh, but a sequence number already delivered
    uint64_t replayed = 0;       // a counter seen before or older than the window
    uint64_t gaps = 0;           // sequence numbers found missing (NACKed)
    uint64_t lost = 0;           // sequence numbers given up (announced LOST, or past the window)
    uint64_t peer_restarts = 0;  // a new boot id from the peer
    // From sending a datagram with events (the first time) to the peer's acknowledgement of it.
    std::array<uint64_t, kAckLagBounds.size() + 1> ack_lag{};
    double ack_lag_seconds = 0;  // their sum
};

class Link {
public:
    // How many counters behind the highest seen a datagram may be and still be accepted once.
    static constexpr uint64_t kReplayWindow = 64;

    explicit Link(const LinkConfig& cfg);

    // A datagram carrying `events` (at most kMaxEventsPerDatagram), kept for resending.
    Datagram send(std::vector<Event> events, Clock::time_point now);

    struct Received {
        bool replayed = false;  // refused: nothing else happened
        bool deliver = false;   // the events are new: apply them
        std::vector<Datagram> replies;
    };
    // A datagram from the peer whose tag has been verified.
    Received receive(const Datagram& d, Clock::time_point now);

    // A datagram without events carrying `flags` (kFlagBulkRequest, kFlagBulkEnd): the end's
    // sequence is the last one sent, so it follows the dump it ends.
    Datagram control(uint8_t flags, Clock::time_point now);

    // Bulk sync, receiving side: the peer asked for a dump (true once per request), and whether
    // the peer's dump has arrived whole (its end marker, and every sequence number up to it).
    bool take_bulk_request();
    bool bulk_complete() const { return bulk_end_seen_ && expecting_ && !seq_after(bulk_end_, expected_ - 1); }
    bool bulk_end_seen() const { return bulk_end_seen_; }

    // Call every 100 ms or so: the keep-alive when nothing was sent for a keep-alive interval,
    // and a NACK again for a gap that is still open.
    std::vector<Datagram> tick(Clock::time_point now);

    std::optional<Clock::time_point> last_heard() const {
        return heard_ ? std::optional<Clock::time_point>(last_heard_) : std::nullopt;
    }
    bool peer_alive(Clock::time_point now) const { return heard_ && now - last_heard_ < 3 * cfg_.keepalive; }
    const LinkStats& stats() const { return stats_; }
    const LinkConfig& config() const { return cfg_; }
    size_t unacknowledged() const { return resend_.size(); }
    uint32_t last_sent() const { return last_sent_; }
    // The next sequence number expected from the peer (valid once it has been heard).
    uint32_t expected() const { return expected_; }

private:
    struct Kept {
        uint32_t sequence;
        std::vector<Event> events;
        Clock::time_point sent;
    };

    Datagram header_only(uint8_t flags, Clock::time_point now);
    void stamp(Datagram& d, Clock::time_point now);
    bool fresh(uint64_t counter);
    void peer_restarted(uint32_t boot);
    void on_ack(uint32_t ack, Clock::time_point now);
    void on_nack(uint32_t first, uint32_t last, Clock::time_point now, std::vector<Datagram>& out);
    void on_lost(uint32_t first, uint32_t last);
    void on_sequence(const Datagram& d, Clock::time_point now, Received& res);
    void nack(uint32_t first, uint32_t last, Clock::time_point now, std::vector<Datagram>& out);
    void advance();

    LinkConfig cfg_;
    LinkStats stats_;

    // Sending.
    uint64_t counter_;
    uint32_t last_sent_ = 0;
    std::deque<Kept> resend_;  // consecutive sequence numbers, oldest first
    Clock::time_point last_send_time_{};
    bool sent_any_ = false;

    // Receiving.
    bool heard_ = false;
    Clock::time_point last_heard_{};
    uint32_t peer_boot_ = 0;
    uint64_t highest_counter_ = 0;
    uint64_t counter_seen_ = 0;  // bit i: highest_counter_ - i was accepted
    bool expecting_ = false;     // expected_ is set
    uint32_t expected_ = 0;
    uint32_t highest_seen_ = 0;  // the highest sequence number received (valid when expecting_)
    struct SerialLess {
        bool operator()(uint32_t a, uint32_t b) const { return seq_after(b, a); }
    };
    // Received beyond expected_, waiting for the gap to fill; all within resend_capacity of
    // expected_, so serial order is a total order on them.
    std::set<uint32_t, SerialLess> ahead_;
    uint32_t in_order_unacked_ = 0;
    Clock::time_point last_nack_{};
    bool bulk_requested_ = false;
    bool bulk_end_seen_ = false;
    uint32_t bulk_end_ = 0;
};

}  // namespace egw::sync
