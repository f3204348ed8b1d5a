// SPDX-License-Identifier: Apache-2.0
//
// See egress_qos_table.h.
#include "control/policy/egress_qos_table.h"

#include <cstring>
#include <vector>

namespace egw::control {

dp::EgressQosTable build_egress_qos_table(const model::EgressQosSelection& selection,
                                          const std::map<std::string, model::Pod>& pods) {
    dp::EgressQosTable t;
    std::vector<std::pair<uint64_t, uint32_t>> pods4;
    std::vector<dp::Ip6Map::Item> pods6;
    for (const auto& [key, pod] : pods) {
        if (pod.host_network || pod.phase == model::PodPhase::succeeded || pod.phase == model::PodPhase::failed)
            continue;
        auto ns = selection.by_namespace.find(pod.meta.namespace_);
        if (ns == selection.by_namespace.end()) continue;
        const std::vector<model::PodQosRule> rules = model::rules_for_pod(ns->second->rules, pod.meta.labels);
        if (rules.empty()) continue;
        // One span per family, shared by the pod's addresses of that family.
        uint32_t span4 = dp::FlatMap::kMissing, span6 = dp::Ip6Map::kMissing;
        for (const net::IpAddr& ip : pod.ips) {
            const bool v6 = ip.is_v6();
            uint32_t& span = v6 ? span6 : span4;
            if (span == dp::FlatMap::kMissing) {
                dp::QosSpan sp;
                sp.first = static_cast<uint32_t>(v6 ? t.rules6.size() : t.rules4.size());
                for (const model::PodQosRule& r : rules) {
                    if (r.dst && r.dst->addr.is_v6() != v6) continue;
                    const uint8_t mark = dp::dscp_mark(r.dscp);
                    if (v6) {
                        dp::QosRule6 q;
                        if (r.dst) {
                            std::memcpy(q.network, r.dst->addr.bytes().data(), 16);
                            q.len = r.dst->len;
                        }
                        q.mark = mark;
                        t.rules6.push_back(q);
                    } else {
                        dp::QosRule4 q;
                        if (r.dst) {
                            q.network = r.dst->addr.v4();
                            q.mask = r.dst->len == 0 ? 0 : ~uint32_t{0} << (32 - r.dst->len);
                        }
                        q.mark = mark;
                        t.rules4.push_back(q);
                    }
                }
                sp.count = static_cast<uint32_t>((v6 ? t.rules6.size() : t.rules4.size()) - sp.first);
                // No rule of this family: the address gets no entry (its traffic is never marked).
                if (sp.count == 0) continue;
                span = static_cast<uint32_t>(v6 ? t.spans6.size() : t.spans4.size());
                (v6 ? t.spans6 : t.spans4).push_back(sp);
            }
            if (v6) {
                dp::Ip6Map::Item item{};
                std::memcpy(item.addr, ip.bytes().data(), 16);
                item.value = span;
                pods6.push_back(item);
            } else {
                pods4.emplace_back(ip.v4(), span);
            }
        }
    }
    t.pods4.build(pods4);
    t.pods6.build(pods6);
    return t;
}

namespace {

std::string selector_text(const model::LabelSelector& sel) {
    if (sel.empty()) return "all";
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : ",") + part; };
    for (const auto& [k, v] : sel.match_labels)
        add(k + "=" + v);
    for (const auto& r : sel.match_expressions) {
        std::string values;
        for (const auto& v : r.values)
            values += (values.empty() ? "" : "|") + v;
        add(r.key + " " + r.op + (values.empty() ? "" : " " + values));
    }
    return s;
}

}  // namespace

std::vector<EgressQosView> egress_qos_views(const std::map<std::string, model::EgressQoS>& objects,
                                            const std::map<std::string, model::Pod>& pods) {
    const model::EgressQosSelection sel = model::select_egress_qos(objects);
    std::vector<EgressQosView> out;
    for (const auto& [key, q] : objects) {
        EgressQosView v;
        v.key = key;
        v.status = kEgressQosApplied;
        for (const std::string& line : sel.ignored) {
            if (line.rfind(key + ": ", 0) == 0) v.status = line.substr(key.size() + 2);
        }
        for (const model::QosRule& r : q.rules)
            v.rules.push_back("dscp " + std::to_string(r.dscp) + " to " + (r.dst ? net::to_string(*r.dst) : "any") +
                              " pods " + selector_text(r.pods));
        if (v.status == kEgressQosApplied) {
            for (const auto& [pkey, pod] : pods) {
                if (pod.meta.namespace_ != q.meta.namespace_ || pod.host_network ||
                    pod.phase == model::PodPhase::succeeded || pod.phase == model::PodPhase::failed)
                    continue;
                if (!model::rules_for_pod(q.rules, pod.meta.labels).empty()) ++v.pods;
            }
        }
        out.push_back(std::move(v));
    }
    return out;
}

}  // namespace egw::control
