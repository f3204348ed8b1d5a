// SPDX-License-Identifier: Apache-2.0
#include "control/neighbor/announcer.h"

#include <spdlog/spdlog.h>

#include <iterator>

namespace egw::control {

Announcer::Key Announcer::key(const Pending& a) {
    Key k{a.port, a.v6, a.ip6};
    if (!a.v6)
        k.addr = {static_cast<uint8_t>(a.ip >> 24), static_cast<uint8_t>(a.ip >> 16), static_cast<uint8_t>(a.ip >> 8),
                  static_cast<uint8_t>(a.ip)};
    return k;
}

void Announcer::update(const dp::PolicySnapshot& p, uint64_t now) {
    if (seen_ && p.generation == generation_) return;
    seen_ = true;
    generation_ = p.generation;
    std::set<Key> next;
    std::vector<Pending> fresh;
    auto add = [&](const Pending& a) {
        Key k = key(a);
        if (!next.insert(k).second || answered_.count(k)) return;
        fresh.push_back(a);
    };
    auto add4 = [&](uint16_t port, uint32_t ip, What what) {
        Pending a;
        a.port = port;
        a.ip = ip;
        a.what = what;
        add(a);
    };
    auto add6 = [&](uint16_t port, const uint8_t* ip, What what) {
        Pending a;
        a.port = port;
        a.v6 = true;
        std::copy(ip, ip + 16, a.ip6.begin());
        a.what = what;
        add(a);
    };
    for (uint16_t port = 0; port < dp::kMaxPorts; ++port) {
        const dp::PortPolicy& pp = p.ports[port];
        if (pp.role == dp::PortRole::none) continue;
        for (unsigned i = 0; i < pp.n_addrs; ++i)
            add4(port, pp.addrs[i], What::port_address);
        for (unsigned i = 0; i < pp.n_addrs6; ++i)
            add6(port, pp.addrs6[i].b, What::port_address);
    }
    p.nat_addresses.for_each([&](uint64_t ip, uint32_t flags) {
        if (!(flags & dp::kNatIngressIp)) return;
        for (uint16_t port = 0; port < dp::kMaxPorts; ++port)
            if ((flags >> dp::kNatArpPortsShift) & (1u << port))
                add4(port, static_cast<uint32_t>(ip), What::ingress_ip);
    });
    p.nat_addresses6.for_each([&](const uint8_t* ip, uint16_t, uint32_t flags) {
        if (!(flags & dp::kNatIngressIp)) return;
        for (uint16_t port = 0; port < dp::kMaxPorts; ++port)
            if ((flags >> dp::kNatArpPortsShift) & (1u << port)) add6(port, ip, What::ingress_ip);
    });
    // Gone: no more announcements for what the gateway no longer answers.
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (next.count(it->first)) {
            ++it;
            continue;
        }
        if (it->second.v6) --pending6_;
        it = pending_.erase(it);
    }
    answered_ = std::move(next);
    if (cfg_.announce_count == 0) return;
    size_t n6 = 0;
    for (Pending& f : fresh) {
        f.left = cfg_.announce_count;
        f.due_tsc = now;
        auto [it, added] = pending_.insert_or_assign(key(f), f);
        (void)it;
        if (f.v6) {
            ++n6;
            if (added) ++pending6_;
        }
        ++(f.v6 ? stats6_ : stats_).started;
    }
    if (fresh.size() > n6)
        spdlog::debug("gratuitous ARP: {} new address(es) to announce, {} time(s) each", fresh.size() - n6,
                      cfg_.announce_count);
    if (n6)
        spdlog::debug("unsolicited Neighbor Advertisement: {} new IPv6 address(es) to announce, {} time(s) each", n6,
                      cfg_.announce_count);
}

void Announcer::run(uint64_t now, const Send& send, const Send6& send6) {
    unsigned budget = kPerRun;
    const uint64_t interval = uint64_t{cfg_.announce_interval_ms} * tsc_hz_ / 1000;
    for (auto it = pending_.begin(); it != pending_.end() && budget > 0;) {
        Pending& a = it->second;
        if (now < a.due_tsc) {
            ++it;
            continue;
        }
        --budget;
        Stats& st = a.v6 ? stats6_ : stats_;
        if (!(a.v6 ? send6(a.port, a.ip6.data()) : send(a.port, a.ip))) {
            ++st.failed;
            break;  // no mbuf or a full ring: the rest waits for the next run
        }
        ++st.sent;
        // Spaced from when it went out: a late one does not bunch the rest up.
        a.due_tsc = now + interval;
        if (--a.left == 0) {
            if (a.v6) --pending6_;
            it = pending_.erase(it);
        } else {
            ++it;
        }
    }
}

std::vector<Announcer::Pending> Announcer::pending() const {
    std::vector<Pending> out;
    out.reserve(pending_.size());
    for (const auto& [k, a] : pending_)
        out.push_back(a);
    return out;
}

}  // namespace egw::control
