// SPDX-License-Identifier: Apache-2.0
//
// The worker's side of the packet trace (trace.h): which packets, and what each stage decided
// for them, read from the metadata the stages leave. Runs only for the bursts of a worker whose
// trace pointer is set.
#include "dataplane/trace.h"

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/burst.h"

namespace egw::dp {

namespace {

bool same_address(const uint8_t* want, bool want_v6, const FrameSummary& f, const uint8_t* have) {
    return want_v6 == f.v6 && std::memcmp(want, have, f.v6 ? 16 : 4) == 0;
}

// The first bytes of the frame's first segment, at most kTraceHeadBytes.
uint16_t copy_head(const rte_mbuf* m, uint8_t* to) {
    auto n = static_cast<uint16_t>(std::min<unsigned>(m->data_len, kTraceHeadBytes));
    std::memcpy(to, rte_pktmbuf_mtod(m, const uint8_t*), n);
    return n;
}

// A flag of the metadata that a packet dropped early may never have had set: read as a byte, so
// that stack garbage is not loaded as a bool (UBSan's -fsanitize=bool).
bool flag(const bool& b) {
    uint8_t v;
    std::memcpy(&v, &b, 1);
    return v != 0;
}

bool has_session(ProfiledStage s) {
    return s == ProfiledStage::nat_lookup || s == ProfiledStage::nat_fast || s == ProfiledStage::nat_slow ||
           s == ProfiledStage::icmp_error;
}

// Whether output will find the next hop's MAC, read as it reads the table (or the packet waits in
// the control thread for ARP or NS). Traced packets only.
bool next_hop_known(const Worker& w, const PacketMeta& pk, bool v6) {
    uint8_t mac[6];
    if (v6) {
        const NeighborTable6* nt = w.shared->neighbors6;
        if (!nt) return false;
        uint32_t slot = nt->find(pk.out_port, pk.next_hop6.b);
        return slot != NeighborTable6::kNone && nt->mac(slot, mac);
    }
    const NeighborTable* nt = w.shared->neighbors;
    if (!nt) return false;
    uint32_t slot = nt->find(pk.out_port, pk.next_hop);
    return slot != NeighborTable::kNone && nt->mac(slot, mac);
}

bool in_tx_buffer(const TxBuffer& tx, const rte_mbuf* m) {
    for (uint16_t k = 0; k < tx.n; ++k)
        if (tx.pkts[k] == m) return true;
    return false;
}

}  // namespace

bool trace_matches(const TraceMatch& m, uint16_t rx_port, const FrameSummary& f) {
    if (m.by_port && rx_port != m.port) return false;
    if (!m.l3_needed()) return true;
    if (!f.l3) return false;
    if (m.proto && f.proto != m.proto && !(m.proto == 1 && f.proto == 58)) return false;
    if (m.by_saddr && !same_address(m.saddr, m.saddr_v6, f, f.src)) return false;
    if (m.by_daddr && !same_address(m.daddr, m.daddr_v6, f, f.dst)) return false;
    if (m.by_sport || m.by_dport) {
        if (!f.l4 || f.fragment) return false;
        bool icmp = f.proto == 1 || f.proto == 58;
        if (!icmp && f.proto != 6 && f.proto != 17) return false;
        uint16_t sport = icmp ? f.icmp_id : f.sport, dport = icmp ? f.icmp_id : f.dport;
        if ((m.by_sport && sport != m.sport) || (m.by_dport && dport != m.dport)) return false;
    }
    return true;
}

void BurstTracer::select(rte_mbuf* const* pkts, unsigned n) {
    TraceShared& ts = *t_.shared;
    for (unsigned i = 0; i < n && t_.used < t_.capacity; ++i) {
        if (ts.taken.load(std::memory_order_relaxed) >= ts.limit) break;
        const rte_mbuf* m = pkts[i];
        TracePacket& tp = t_.packets[t_.used];
        tp.before_len = copy_head(m, tp.before);
        if (!trace_matches(ts.match, m->port, summarize_frame(tp.before, tp.before_len))) continue;
        // The budget is the workers' together: one that loses the race for the last packet
        // leaves it untraced.
        if (ts.taken.fetch_add(1, std::memory_order_relaxed) >= ts.limit) break;
        tp.tsc = w_.now;
        tp.rx_port = m->port;
        tp.frame_len = m->pkt_len;
        tp.n_steps = 0;
        tp.after_len = 0;
        tp.outcome = static_cast<uint8_t>(TraceOutcome::gone);
        slot_[i] = t_.used++;
        mask_ |= 1u << i;
    }
}

void BurstTracer::after(ProfiledStage stage, uint32_t which, const Burst& b) {
    for_each_packet(which, [&](unsigned i) {
        TracePacket& tp = t_.packets[slot_[i]];
        if (tp.n_steps == kTraceMaxSteps) return;
        const PacketMeta& pk = b.pkt[i];
        TraceStep& st = tp.steps[tp.n_steps];
        const TraceStep* prev = tp.n_steps ? &tp.steps[tp.n_steps - 1] : nullptr;
        ++tp.n_steps;
        st = TraceStep{};
        st.stage = static_cast<uint8_t>(stage);
        st.next = static_cast<uint8_t>(pk.next);
        st.reason = static_cast<uint8_t>(pk.reason);
        st.icmp = static_cast<uint8_t>(pk.icmp);
        st.v6 = flag(pk.v6);
        st.session = SessionTable::kNone;
        // The stages from the lookup to the ICMP error translation are those that set a session
        // (input sets none for the packets it sends past the lookup).
        if (has_session(stage)) {
            st.session = pk.session;
            uint32_t before =
                prev && has_session(static_cast<ProfiledStage>(prev->stage)) ? prev->session : SessionTable::kNone;
            auto change = TraceSession::none;
            if (pk.session != SessionTable::kNone)
                change = before == SessionTable::kNone && stage == ProfiledStage::nat_slow ? TraceSession::created
                                                                                           : TraceSession::found;
            else if (before != SessionTable::kNone)
                change = TraceSession::closed;
            st.session_change = static_cast<uint8_t>(change);
        }
        switch (pk.next) {
        case Next::handoff:
            st.owner = pk.owner;
            tp.outcome = static_cast<uint8_t>(TraceOutcome::handed_off);
            return;  // the owning worker's now: not to be read again here
        case Next::gone:
            if (stage != ProfiledStage::handoff) tp.outcome = static_cast<uint8_t>(TraceOutcome::gone);
            return;
        case Next::ip_forward:
            st.vrf = pk.vrf;
            st.via_ingress = pk.via_ingress;
            break;
        case Next::output:
            st.out_port = pk.out_port;
            if (st.v6)
                std::memcpy(st.next_hop, pk.next_hop6.b, 16);
            else {
                uint32_t nh = rte_cpu_to_be_32(pk.next_hop);
                std::memcpy(st.next_hop, &nh, 4);
            }
            break;
        case Next::transmit:
            st.out_port = pk.out_port;
            break;
        default:
            break;
        }
        const rte_mbuf* m = b.m[i];
        uint8_t head[kTraceHeadBytes];
        FrameSummary f = summarize_frame(head, copy_head(m, head));
        if (f.l3) {
            st.has_tuple = true;
            std::memcpy(st.src, f.src, 16);
            std::memcpy(st.dst, f.dst, 16);
            bool icmp = f.proto == 1 || f.proto == 58;
            st.sport = icmp ? f.icmp_id : f.sport;
            st.dport = icmp ? f.icmp_id : f.dport;
            st.ttl = f.ttl;
            st.proto = f.proto;
        }
    });
}

void BurstTracer::before_output(const Burst& b) {
    uint32_t leaving = (b.pending(Next::output) | b.pending(Next::transmit) | b.pending(Next::drop)) & mask_;
    for_each_packet(leaving, [&](unsigned i) {
        TracePacket& tp = t_.packets[slot_[i]];
        const PacketMeta& pk = b.pkt[i];
        tp.after_len = copy_head(b.m[i], tp.after);
        auto outcome = TraceOutcome::not_queued;
        if (pk.next == Next::drop)
            outcome = TraceOutcome::dropped;
        else if (pk.next == Next::output && !next_hop_known(w_, pk, flag(pk.v6)))
            outcome = TraceOutcome::held;
        tp.outcome = static_cast<uint8_t>(outcome);
    });
}

void BurstTracer::after_output(const Burst& b) {
    uint32_t leaving = (b.pending(Next::output) | b.pending(Next::transmit) | b.pending(Next::drop)) & mask_;
    for_each_packet(leaving, [&](unsigned i) {
        const PacketMeta& pk = b.pkt[i];
        TracePacket& tp = t_.packets[slot_[i]];
        if (tp.n_steps < kTraceMaxSteps) {
            TraceStep& st = tp.steps[tp.n_steps++];
            st = TraceStep{};
            st.stage = static_cast<uint8_t>(ProfiledStage::output);
            st.next = static_cast<uint8_t>(pk.next);
            st.reason = static_cast<uint8_t>(pk.reason);
            st.v6 = flag(pk.v6);
            st.session = SessionTable::kNone;
            if (pk.next != Next::drop) st.out_port = pk.out_port;
        }
        if (pk.next == Next::drop) return;
        // Still in the transmit buffer (sent after the burst): the frame as it will leave, with
        // its Ethernet header. Anywhere else it is no longer this worker's to read.
        if (pk.out_port < kMaxPorts && in_tx_buffer(w_.tx[pk.out_port], b.m[i])) {
            tp.after_len = copy_head(b.m[i], tp.after);
            tp.outcome = static_cast<uint8_t>(TraceOutcome::queued);
        }
    });
}

void BurstTracer::finish() {
    if (mask_) t_.published.store(t_.used, std::memory_order_release);
}

}  // namespace egw::dp
