// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_assignment.h.
#include "control/k8s_source/egress_ip_assignment.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace egw::k8s_source {

namespace {

bool holds(const EgressIPNode& node, const net::IpAddr& ip) {
    for (const auto& subnet : node.subnets)
        if (subnet.contains(ip)) return true;
    return false;
}

struct Placement {
    std::optional<std::string> node;  // nullopt: not placed (yet)
};

class Assigner {
public:
    explicit Assigner(const std::vector<EgressIPNode>& nodes) {
        for (const auto& n : nodes)
            nodes_.emplace(n.name, &n);  // by name: ties go to the name that sorts first
    }

    // The node that status.items names for `ip`, when it can still host it.
    bool keep(const std::string& node, const net::IpAddr& ip, std::set<std::string>& used_by_object) {
        auto it = nodes_.find(node);
        if (it == nodes_.end()) return false;
        const EgressIPNode& n = *it->second;
        if (!n.live || !n.assignable || !holds(n, ip) || used_by_object.count(node) || load_of(node) >= n.capacity)
            return false;
        take(node, used_by_object);
        return true;
    }

    // The node with the fewest addresses that can host `ip`; "" and the reason when none can.
    std::string place(const net::IpAddr& ip, std::set<std::string>& used_by_object, std::string& reason) {
        bool subnet = false, candidate = false, free_of_object = false;
        const EgressIPNode* best = nullptr;
        for (const auto& [name, n] : nodes_) {
            if (!holds(*n, ip)) continue;
            subnet = true;
            if (!n->live || !n->assignable) continue;
            candidate = true;
            if (used_by_object.count(name)) continue;
            free_of_object = true;
            if (load_of(name) >= n->capacity) continue;
            if (!best || load_of(name) < load_of(best->name)) best = n;
        }
        if (best) {
            take(best->name, used_by_object);
            return best->name;
        }
        if (!subnet)
            reason = "no node has an outside subnet that contains it";
        else if (!candidate)
            reason = "no live egress-assignable node has an outside subnet that contains it";
        else if (!free_of_object)
            reason = "every node that could host it hosts another address of this EgressIP";
        else
            reason = "every node that could host it is at capacity";
        return "";
    }

    std::map<std::string, size_t> load() const { return load_; }

private:
    size_t load_of(const std::string& node) const {
        auto it = load_.find(node);
        return it == load_.end() ? 0 : it->second;
    }
    void take(const std::string& node, std::set<std::string>& used_by_object) {
        ++load_[node];
        used_by_object.insert(node);
    }

    std::map<std::string, const EgressIPNode*> nodes_;
    std::map<std::string, size_t> load_;
};

}  // namespace

EgressIPAssignment assign_egress_ips(const std::map<std::string, model::EgressIP>& egress_ips,
                                     const std::vector<EgressIPNode>& nodes) {
    Assigner assigner(nodes);
    // Per EgressIP: the node of each spec address (by index) and the nodes it already uses.
    std::map<std::string, std::vector<Placement>> placed;
    std::map<std::string, std::set<std::string>> used;

    // Sticky first, over every object, so that a new address never takes the room an address
    // already served needs.
    for (const auto& [name, eip] : egress_ips) {
        std::vector<Placement>& p = placed[name];
        p.resize(eip.egress_ips.size());
        for (size_t i = 0; i < eip.egress_ips.size(); ++i) {
            for (const auto& item : eip.status_items) {
                if (item.egress_ip != eip.egress_ips[i]) continue;
                if (assigner.keep(item.node, item.egress_ip, used[name])) p[i].node = item.node;
                break;  // only the first item of an address counts
            }
        }
    }

    EgressIPAssignment out;
    for (const auto& [name, eip] : egress_ips) {
        std::vector<Placement>& p = placed[name];
        std::vector<model::EgressIPStatusItem>& items = out.items[name];
        for (size_t i = 0; i < eip.egress_ips.size(); ++i) {
            const net::IpAddr& ip = eip.egress_ips[i];
            if (!p[i].node) {
                std::string reason;
                std::string node = assigner.place(ip, used[name], reason);
                if (node.empty()) {
                    out.unhostable.push_back(UnhostableEgressIP{name, ip, reason});
                    continue;
                }
                p[i].node = std::move(node);
            }
            items.push_back(model::EgressIPStatusItem{*p[i].node, ip});
        }
    }
    out.load = assigner.load();
    return out;
}

std::vector<EgressIPStatusWrite> status_writes(const std::map<std::string, model::EgressIP>& egress_ips,
                                               const EgressIPAssignment& assignment) {
    auto sorted = [](std::vector<model::EgressIPStatusItem> items) {
        std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
            return std::tie(a.egress_ip, a.node) < std::tie(b.egress_ip, b.node);
        });
        return items;
    };
    std::vector<EgressIPStatusWrite> out;
    for (const auto& [name, eip] : egress_ips) {
        auto it = assignment.items.find(name);
        if (it == assignment.items.end()) continue;  // not assigned in this pass
        if (sorted(eip.status_items) == sorted(it->second)) continue;
        out.push_back(EgressIPStatusWrite{name, eip.egress_ips, it->second, eip.meta.resource_version});
    }
    return out;
}

UnhostableReports::Delta UnhostableReports::update(const std::vector<UnhostableEgressIP>& now) {
    Delta d;
    std::map<std::pair<std::string, net::IpAddr>, std::string> next;
    for (const auto& u : now) {
        auto key = std::make_pair(u.egress_ip, u.ip);
        auto it = current_.find(key);
        if (it == current_.end() || it->second != u.reason) d.reported.push_back(u);
        next.emplace(std::move(key), u.reason);
    }
    for (const auto& [key, reason] : current_)
        if (!next.count(key)) d.resolved.push_back(UnhostableEgressIP{key.first, key.second, reason});
    current_ = std::move(next);
    return d;
}

}  // namespace egw::k8s_source
