// SPDX-License-Identifier: Apache-2.0
#include "control/sync/link.h"

#include <algorithm>

namespace egw::sync {

Link::Link(const LinkConfig& cfg) : cfg_(cfg), counter_(cfg.first_counter) {
    if (cfg_.resend_capacity == 0) cfg_.resend_capacity = 1;
    if (cfg_.ack_every == 0) cfg_.ack_every = 1;
}

void Link::stamp(Datagram& d, Clock::time_point now) {
    Header& h = d.header;
    h.sender = cfg_.self;
    h.boot = cfg_.boot;
    h.counter = counter_++;
    // Every datagram acknowledges what has arrived so far: acknowledgements ride on the traffic.
    if (expecting_) {
        h.flags |= kFlagAck;
        h.ack = expected_ - 1;
        in_order_unacked_ = 0;
    }
    ++stats_.datagrams_sent;
    last_send_time_ = now;
    sent_any_ = true;
}

Datagram Link::header_only(uint8_t flags, Clock::time_point now) {
    Datagram d;
    d.header.flags = flags;
    d.header.sequence = last_sent_;
    stamp(d, now);
    return d;
}

Datagram Link::send(std::vector<Event> events, Clock::time_point now) {
    Datagram d;
    d.header.sequence = ++last_sent_;
    d.events = std::move(events);
    stats_.events_sent += d.events.size();
    if (resend_.size() == cfg_.resend_capacity) {
        resend_.pop_front();
        ++stats_.evicted;
    }
    resend_.push_back(Kept{d.header.sequence, d.events, now});
    stamp(d, now);
    return d;
}

bool Link::fresh(uint64_t counter) {
    if (counter_seen_ == 0 || counter > highest_counter_) {
        uint64_t shift = counter_seen_ == 0 ? kReplayWindow : counter - highest_counter_;
        counter_seen_ = shift >= kReplayWindow ? 0 : counter_seen_ << shift;
        counter_seen_ |= 1;
        highest_counter_ = counter;
        return true;
    }
    uint64_t behind = highest_counter_ - counter;
    if (behind >= kReplayWindow || (counter_seen_ >> behind & 1)) return false;
    counter_seen_ |= uint64_t{1} << behind;
    return true;
}

void Link::peer_restarted(uint32_t boot) {
    ++stats_.peer_restarts;
    peer_boot_ = boot;
    // The peer's sequence numbers start again, and what we kept for its former run is of no use
    // to the new one (bulk sync gives it the whole table).
    expecting_ = false;
    ahead_.clear();
    in_order_unacked_ = 0;
    resend_.clear();
    // Its sessions are those of its new run: what it dumped before no longer counts.
    bulk_end_seen_ = false;
}

Datagram Link::control(uint8_t flags, Clock::time_point now) {
    // Only an end marker that follows this request counts: one in flight from an earlier dump
    // would not cover what the peer created since.
    if (flags & kFlagBulkRequest) bulk_end_seen_ = false;
    return header_only(flags, now);
}

bool Link::take_bulk_request() {
    bool r = bulk_requested_;
    bulk_requested_ = false;
    return r;
}

void Link::on_ack(uint32_t ack, Clock::time_point now) {
    while (!resend_.empty() && !seq_after(resend_.front().sequence, ack)) {
        double lag = std::chrono::duration<double>(now - resend_.front().sent).count();
        size_t bucket = 0;
        while (bucket < kAckLagBounds.size() && lag > kAckLagBounds[bucket])
            ++bucket;
        ++stats_.ack_lag[bucket];
        stats_.ack_lag_seconds += lag;
        resend_.pop_front();
    }
}

void Link::on_nack(uint32_t first, uint32_t last, Clock::time_point now, std::vector<Datagram>& out) {
    // Nothing after what was sent can be asked for.
    if (seq_after(last, last_sent_)) last = last_sent_;
    if (seq_after(first, last)) return;
    uint32_t oldest = resend_.empty() ? last_sent_ + 1 : resend_.front().sequence;
    if (seq_after(oldest, first)) {
        uint32_t lost_last = seq_after(oldest - 1, last) ? last : oldest - 1;
        stats_.lost_announced += lost_last - first + 1;
        Datagram d = header_only(kFlagLost, now);
        d.header.range_first = first;
        d.header.range_last = lost_last;
        out.push_back(std::move(d));
        first = oldest;
    }
    for (const Kept& k : resend_) {
        if (seq_after(first, k.sequence)) continue;
        if (seq_after(k.sequence, last)) break;
        Datagram d;
        d.header.sequence = k.sequence;
        d.events = k.events;
        stamp(d, now);
        ++stats_.resent;
        out.push_back(std::move(d));
    }
}

void Link::advance() {
    // What is before expected_ (after a LOST or a jump) is of no more interest.
    while (!ahead_.empty() && seq_after(expected_, *ahead_.begin()))
        ahead_.erase(ahead_.begin());
    while (!ahead_.empty() && *ahead_.begin() == expected_) {
        ahead_.erase(ahead_.begin());
        ++expected_;
    }
    if (seq_after(expected_ - 1, highest_seen_)) highest_seen_ = expected_ - 1;
}

void Link::on_lost(uint32_t first, uint32_t last) {
    if (!expecting_ || seq_after(first, last) || !seq_after(last + 1, expected_)) return;
    // Only what this side could have asked for: nothing past what it has seen announced.
    if (seq_after(last, highest_seen_)) last = highest_seen_;
    if (seq_after(first, last)) return;
    if (seq_after(first, expected_)) {
        // A hole in the middle: count it now; expected_ passes it once the part before fills.
        for (uint32_t s = first; s != last + 1; ++s) {
            if (ahead_.insert(s).second) ++stats_.lost;
        }
    } else {
        for (uint32_t s = expected_; s != last + 1; ++s) {
            if (!ahead_.count(s)) ++stats_.lost;
        }
        expected_ = last + 1;
    }
    advance();
}

void Link::nack(uint32_t first, uint32_t last, Clock::time_point now, std::vector<Datagram>& out) {
    Datagram d = header_only(kFlagNack, now);
    d.header.range_first = first;
    d.header.range_last = last;
    ++stats_.nacks_sent;
    last_nack_ = now;
    out.push_back(std::move(d));
}

void Link::on_sequence(const Datagram& d, Clock::time_point now, Received& res) {
    uint32_t s = d.header.sequence;
    bool data = !d.events.empty();
    if (!expecting_) {
        // First contact with this run of the peer: start from here (bulk sync fills what came
        // before).
        expecting_ = true;
        expected_ = data ? s : s + 1;
        highest_seen_ = expected_ - 1;
    }
    if (!data) {
        // A keep-alive or control datagram: `s` is the last sequence number the peer sent, so
        // anything up to it that has not arrived was lost on the way.
        if (seq_after(s, highest_seen_) && static_cast<uint32_t>(s - expected_) >= cfg_.resend_capacity) {
            // Further behind than the peer could resend: give it all up.
            stats_.lost += s + 1 - expected_ - static_cast<uint32_t>(ahead_.size());
            expected_ = s + 1;
            advance();
        } else if (seq_after(s, highest_seen_)) {
            uint32_t from = highest_seen_ + 1;
            stats_.gaps += s - from + 1;
            highest_seen_ = s;
            nack(from, s, now, res.replies);
        }
        return;
    }
    if (seq_after(expected_, s) || ahead_.count(s)) {
        ++stats_.duplicates;
        return;
    }
    if (static_cast<uint32_t>(s - expected_) >= cfg_.resend_capacity) {
        // Further ahead than the peer could resend: give up what lies between.
        stats_.lost += s - expected_ - static_cast<uint32_t>(ahead_.size());
        expected_ = s;
        advance();
    }
    res.deliver = true;
    stats_.events_received += d.events.size();
    if (s == expected_) {
        ++expected_;
        advance();
        if (++in_order_unacked_ >= cfg_.ack_every) {
            res.replies.push_back(header_only(0, now));
            ++stats_.acks_sent;
        }
        return;
    }
    ahead_.insert(s);
    if (seq_after(s, highest_seen_ + 1)) {
        uint32_t from = highest_seen_ + 1;
        stats_.gaps += s - from;
        nack(from, s - 1, now, res.replies);
    }
    if (seq_after(s, highest_seen_)) highest_seen_ = s;
}

Link::Received Link::receive(const Datagram& d, Clock::time_point now) {
    Received res;
    const Header& h = d.header;
    if (!fresh(h.counter)) {
        ++stats_.replayed;
        res.replayed = true;
        return res;
    }
    ++stats_.datagrams_received;
    if (heard_ && h.boot != peer_boot_) peer_restarted(h.boot);
    peer_boot_ = h.boot;
    heard_ = true;
    last_heard_ = now;
    if (h.flags & kFlagAck) on_ack(h.ack, now);
    if (h.flags & kFlagNack) on_nack(h.range_first, h.range_last, now, res.replies);
    if (h.flags & kFlagLost) on_lost(h.range_first, h.range_last);
    on_sequence(d, now, res);
    if (h.flags & kFlagBulkRequest) bulk_requested_ = true;
    if (h.flags & kFlagBulkEnd) {
        bulk_end_seen_ = true;
        bulk_end_ = h.sequence;
    }
    return res;
}

std::vector<Datagram> Link::tick(Clock::time_point now) {
    std::vector<Datagram> out;
    if (expecting_ && seq_after(highest_seen_, expected_ - 1) && now - last_nack_ >= cfg_.nack_retry) {
        // The first gap is still open: ask again (a NACK or its answer may have been lost).
        uint32_t gap_last = ahead_.empty() ? highest_seen_ : *ahead_.begin() - 1;
        nack(expected_, gap_last, now, out);
    }
    if (!sent_any_ || now - last_send_time_ >= cfg_.keepalive) {
        out.push_back(header_only(0, now));
        ++stats_.keepalives_sent;
    }
    return out;
}

}  // namespace egw::sync
