// SPDX-License-Identifier: Apache-2.0
#include "control/neighbor/announcer.h"

#include <spdlog/spdlog.h>

namespace egw::control {

void Announcer::update(const dp::PolicySnapshot& p, uint64_t now) {
    if (seen_ && p.generation == generation_) return;
    seen_ = true;
    generation_ = p.generation;
    std::unordered_set<uint64_t> next;
    std::vector<Pending> fresh;
    auto add = [&](uint16_t port, uint32_t ip, What what) {
        if (!next.insert(key(port, ip)).second || answered_.count(key(port, ip))) return;
        fresh.push_back(Pending{port, ip, what, cfg_.announce_count, now});
    };
    for (uint16_t port = 0; port < dp::kMaxPorts; ++port) {
        const dp::PortPolicy& pp = p.ports[port];
        if (pp.role == dp::PortRole::none) continue;
        for (unsigned i = 0; i < pp.n_addrs; ++i)
            add(port, pp.addrs[i], What::port_address);
    }
    p.nat_addresses.for_each([&](uint64_t ip, uint32_t flags) {
        if (!(flags & dp::kNatIngressIp)) return;
        for (uint16_t port = 0; port < dp::kMaxPorts; ++port)
            if ((flags >> dp::kNatArpPortsShift) & (1u << port)) add(port, static_cast<uint32_t>(ip), What::ingress_ip);
    });
    // Gone: no more announcements for what the gateway no longer answers.
    for (auto it = pending_.begin(); it != pending_.end();)
        it = next.count(it->first) ? std::next(it) : pending_.erase(it);
    answered_ = std::move(next);
    if (cfg_.announce_count == 0) return;
    for (const Pending& f : fresh) {
        pending_[key(f.port, f.ip)] = f;
        ++stats_.started;
    }
    if (!fresh.empty())
        spdlog::debug("gratuitous ARP: {} new address(es) to announce, {} time(s) each", fresh.size(),
                      cfg_.announce_count);
}

void Announcer::run(uint64_t now, const Send& send) {
    unsigned budget = kPerRun;
    const uint64_t interval = uint64_t{cfg_.announce_interval_ms} * tsc_hz_ / 1000;
    for (auto it = pending_.begin(); it != pending_.end() && budget > 0;) {
        Pending& a = it->second;
        if (now < a.due_tsc) {
            ++it;
            continue;
        }
        --budget;
        if (!send(a.port, a.ip)) {
            ++stats_.failed;
            break;  // no mbuf or a full ring: the rest waits for the next run
        }
        ++stats_.sent;
        // Spaced from when it went out: a late one does not bunch the rest up.
        a.due_tsc = now + interval;
        if (--a.left == 0)
            it = pending_.erase(it);
        else
            ++it;
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
