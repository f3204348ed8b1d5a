// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_assignment.h.
#include "control/k8s_source/egress_ip_assignment.h"

#include <optional>

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

}  // namespace egw::k8s_source
