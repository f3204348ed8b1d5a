// SPDX-License-Identifier: Apache-2.0
//
// The cluster-wide EgressService rules. See decisions.h.
#include "control/k8s_source/decisions.h"

#include <algorithm>
#include <string_view>

#include "control/k8s/writer.h"

namespace egw::k8s_source {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

const std::vector<const model::EndpointSlice*>* slices_of(const ClusterView& view, const std::string& key) {
    auto it = view.slices.find(key);
    return it == view.slices.end() ? nullptr : &it->second;
}

// One line on why no node qualifies, counting the first condition each node fails.
std::string no_candidate_reason(const ClusterView& view, const model::ServiceFacts& facts) {
    size_t not_ready = 0, no_match = 0, no_endpoint = 0, not_live = 0;
    const auto& sel = facts.egress_service->node_selector;
    for (const auto& [name, node] : view.objects.nodes) {
        if (!model::selector_matches(sel, node.meta.labels))
            ++no_match;
        else if (facts.state.etp_local &&
                 !std::binary_search(facts.state.endpoint_nodes.begin(), facts.state.endpoint_nodes.end(), name))
            ++no_endpoint;
        else if (!node.ready)
            ++not_ready;
        else if (!view.live_nodes.count(name))
            ++not_live;
    }
    if (view.objects.nodes.empty()) return "no eligible node: there are no nodes";
    std::string why = "no eligible node (" + std::to_string(view.objects.nodes.size()) + " node(s):";
    const char* sep = " ";
    auto part = [&](size_t n, const char* what) {
        if (n == 0) return;
        why += sep + std::to_string(n) + " " + what;
        sep = ", ";
    };
    part(no_match, "not matching nodeSelector");
    part(no_endpoint, "without an endpoint (externalTrafficPolicy Local)");
    part(not_ready, "not Ready");
    part(not_live, "without a live egwd");
    return why + ")";
}

}  // namespace

std::optional<SteadyClock::time_point> observed_expiry(const model::Lease& lease, const LeaseObservations& seen) {
    if (lease.holder_identity.empty() || lease.lease_duration_seconds <= 0) return std::nullopt;
    auto from = seen.view_since;
    if (auto it = seen.changed.find(model::key_of(lease.meta)); it != seen.changed.end())
        from = std::max(from, it->second);
    return from + std::chrono::seconds(lease.lease_duration_seconds);
}

Liveness liveness(const model::ObjectSet& objects, const LeaseObservations& seen, SteadyClock::time_point now,
                  const std::string& prefix) {
    Liveness out;
    for (const auto& [key, lease] : objects.leases) {
        if (!starts_with(lease.meta.name, prefix)) continue;
        std::string node = lease.meta.name.substr(prefix.size());
        auto expiry = observed_expiry(lease, seen);
        if (node.empty() || !expiry) continue;
        if (now >= *expiry) {
            // Ran out: expired once a write of this egwd sent since then was accepted. Until that
            // write, the API may have refused the holder's renewals as it may refuse this egwd's.
            if (!seen.write_accepted_sent || *seen.write_accepted_sent >= *expiry) continue;
            out.live.insert(node);
            continue;
        }
        out.live.insert(node);
        if (!out.next_change || *expiry < *out.next_change) out.next_change = *expiry;
    }
    return out;
}

const std::string* Allocations::host_of(const std::string& key) const {
    auto it = hosts_.find(key);
    return it == hosts_.end() ? nullptr : &it->second;
}

size_t Allocations::load(const std::string& node) const {
    auto it = load_.find(node);
    return it == load_.end() ? 0 : it->second;
}

void Allocations::assign(const std::string& key, const std::string& node) {
    release(key);
    hosts_[key] = node;
    ++load_[node];
}

void Allocations::release(const std::string& key) {
    auto it = hosts_.find(key);
    if (it == hosts_.end()) return;
    auto l = load_.find(it->second);
    if (l != load_.end() && --l->second == 0) load_.erase(l);
    hosts_.erase(it);
}

void Allocations::clear() {
    hosts_.clear();
    load_.clear();
}

bool node_eligible(const ClusterView& view, const model::ServiceFacts& facts, const std::string& node,
                   std::string* why) {
    std::string local;
    std::string& w = why ? *why : local;
    auto it = view.objects.nodes.find(node);
    if (it == view.objects.nodes.end()) {
        w = "node " + node + " no longer exists";
        return false;
    }
    if (!it->second.ready) {
        w = "node " + node + " is not Ready";
        return false;
    }
    if (facts.egress_service && !model::selector_matches(facts.egress_service->node_selector, it->second.meta.labels)) {
        w = "node " + node + " does not match nodeSelector";
        return false;
    }
    if (facts.state.etp_local &&
        !std::binary_search(facts.state.endpoint_nodes.begin(), facts.state.endpoint_nodes.end(), node)) {
        w = "node " + node + " hosts no endpoint (externalTrafficPolicy Local)";
        return false;
    }
    if (!view.live_nodes.count(node)) {
        w = "node " + node + " has no live egwd (its Lease expired)";
        return false;
    }
    return true;
}

HostDecision decide_host(const ClusterView& view, const std::string& key, const Allocations& alloc) {
    HostDecision d;
    d.key = key;
    model::ServiceFacts facts = model::service_facts(view.objects, key, slices_of(view, key), view.pod_cidrs);
    d.mode = facts.state.mode;
    if (!facts.egress_service) {
        d.reason = "EgressService deleted";
        return d;
    }
    d.exists = true;
    if (!facts.service) {
        d.reason = "Service not found";
        return d;
    }
    if (d.mode == model::Mode::network) {
        // The cluster manager does not look at the Service's type, ingress or endpoints here.
        d.host = model::kHostAll;
        return d;
    }
    std::string why;
    if (!facts.load_balancer) {
        d.reason = "Service is not type LoadBalancer";
    } else if (!facts.has_ingress_ip) {
        d.reason = "Service has no ingress IP";
    } else if (!facts.state.has_pod_endpoints()) {
        d.reason = "no endpoints in the pod network";
    } else if (!model::selector_valid(facts.egress_service->node_selector, &why)) {
        d.reason = "invalid nodeSelector: " + why;
    }
    if (!d.reason.empty()) return d;

    if (const std::string* current = alloc.host_of(key)) {
        if (node_eligible(view, facts, *current, &why)) {
            d.host = *current;  // sticky
            return d;
        }
        d.reason = "host " + *current + " no longer eligible: " + why;
        d.reelect = true;
        return d;
    }

    // Nothing allocated, but status.host names a node: keep it when it qualifies, else pass
    // through "" as any failover does.
    std::string status = facts.egress_service->status_host;
    if (view.written) {
        if (auto w = view.written->find(key); w != view.written->end()) status = w->second;
    }
    if (!status.empty() && status != model::kHostAll) {
        if (node_eligible(view, facts, status, &why)) {
            d.host = status;
            return d;
        }
        d.reason = "host " + status + " no longer eligible: " + why;
        d.reelect = true;
        return d;
    }

    const std::string* best = nullptr;
    size_t best_load = 0;
    for (const auto& [name, node] : view.objects.nodes) {
        if (!node_eligible(view, facts, name)) continue;
        size_t l = alloc.load(name);
        if (!best || l < best_load) {
            best = &name;
            best_load = l;
        }
    }
    if (!best) {
        d.reason = no_candidate_reason(view, facts);
        return d;
    }
    d.host = *best;
    return d;
}

void apply(Allocations& alloc, const HostDecision& d) {
    if (d.exists && d.mode == model::Mode::load_balancer_ip && !d.host.empty() && d.host != model::kHostAll)
        alloc.assign(d.key, d.host);
    else
        alloc.release(d.key);
}

Allocations restore_allocations(const ClusterView& view) {
    Allocations alloc;
    for (const auto& [key, es] : view.objects.egress_services) {
        if (es.status_host.empty() || es.status_host == model::kHostAll) continue;
        if (es.source_ip_by == "Network") continue;
        auto it = view.slices.find(key);
        model::ServiceFacts facts =
            model::service_facts(view.objects, key, it == view.slices.end() ? nullptr : &it->second, view.pod_cidrs);
        if (!facts.service || !facts.load_balancer || !facts.has_ingress_ip || !facts.state.has_pod_endpoints())
            continue;
        if (!model::selector_valid(es.node_selector)) continue;
        if (!node_eligible(view, facts, es.status_host)) continue;
        alloc.assign(key, es.status_host);
    }
    return alloc;
}

model::ServiceState serving_state(model::ServiceFacts facts, const std::string& self_node) {
    model::ServiceState st = std::move(facts.state);
    if (!facts.egress_service) {
        st.reason = "EgressService not found";
        return st;
    }
    const std::string& host = facts.egress_service->status_host;
    st.status_host = host;
    if (host == model::kHostAll)
        st.mode = model::Mode::network;
    else if (!host.empty())
        st.mode = model::Mode::load_balancer_ip;

    if (host.empty()) {
        st.reason =
            facts.egress_service->has_status ? "status.host is \"\" (no gateway serves it)" : "no status.host yet";
    } else if (host != model::kHostAll && host != self_node) {
        st.reason = "served by " + host;
    } else if (!facts.service) {
        st.reason = "Service not found";
    } else if (!facts.load_balancer) {
        st.reason = "Service is not type LoadBalancer";
    } else if (!facts.has_ingress_ip) {
        st.reason = "Service has no ingress IP";
    } else {
        st.serve_here = true;
    }
    return st;
}

std::map<std::string, std::set<std::string>> desired_labels(const Allocations& alloc) {
    std::map<std::string, std::set<std::string>> out;
    for (const auto& [key, node] : alloc.hosts()) {
        std::string label = model::node_label_for(key);
        // A key the API server would refuse is left out: one bad key fails the node's whole patch.
        if (model::label_key_problem(label).empty()) out[node].insert(std::move(label));
    }
    return out;
}

std::optional<LabelPatch> label_patch(const model::Node& node, const std::set<std::string>& wanted) {
    LabelPatch p;
    p.node = node.meta.name;
    const std::string_view prefix = model::kNodeLabelPrefix;
    for (const auto& [k, v] : node.meta.labels) {
        if (!starts_with(k, prefix)) continue;
        if (!wanted.count(k))
            p.labels[k] = std::nullopt;
        else if (!v.empty())
            p.labels[k] = "";
    }
    for (const auto& k : wanted)
        if (!node.meta.labels.count(k)) p.labels[k] = "";
    if (p.labels.empty()) return std::nullopt;
    return p;
}

std::vector<LabelPatch> label_patches(const model::ObjectSet& objects, const Allocations& alloc) {
    const auto wanted = desired_labels(alloc);
    static const std::set<std::string> none;
    std::vector<LabelPatch> out;
    for (const auto& [name, node] : objects.nodes) {
        auto it = wanted.find(name);
        if (auto p = label_patch(node, it == wanted.end() ? none : it->second)) out.push_back(std::move(*p));
    }
    return out;
}

}  // namespace egw::k8s_source
