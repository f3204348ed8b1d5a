// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_selection.h.
#include "control/model/egress_ip_selection.h"

#include <algorithm>

#include "control/model/rules.h"

namespace egw::model {

namespace {

// The pods of a namespace: ObjectSet keys pods "namespace/name", and a namespace name holds no
// '/', so they are one contiguous range of the sorted map.
template <class Map, class F>
void for_each_in_namespace(Map& pods, const std::string& ns, F&& f) {
    const std::string prefix = ns + "/";
    for (auto it = pods.lower_bound(prefix); it != pods.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
        f(it++);
}

std::string namespace_of(const std::string& pod_key) {
    return pod_key.substr(0, pod_key.find('/'));
}

}  // namespace

bool pod_selectable(const Pod& pod) {
    return pod.phase != PodPhase::succeeded && pod.phase != PodPhase::failed && !pod.host_network && !pod.ips.empty();
}

EgressIPSelected EgressIPSelection::select(const ObjectSet& objects, const EgressIP& eip) const {
    EgressIPSelected out;
    for (const auto& [name, ns] : objects.namespaces) {
        if (!selector_matches(eip.namespace_selector, ns.meta.labels)) continue;
        out.namespaces.insert(name);
        for_each_in_namespace(objects.pods, name, [&](auto it) {
            const Pod& pod = it->second;
            if (pod_selectable(pod) && selector_matches(eip.pod_selector, pod.meta.labels))
                out.pods.emplace(it->first, pod.ips);
        });
    }
    return out;
}

void EgressIPSelection::match(const std::string& ns, const std::string& egress_ip) {
    by_namespace_[ns].insert(egress_ip);
}

void EgressIPSelection::unmatch(const std::string& ns, const std::string& egress_ip) {
    auto it = by_namespace_.find(ns);
    if (it == by_namespace_.end()) return;
    it->second.erase(egress_ip);
    if (it->second.empty()) by_namespace_.erase(it);
}

bool EgressIPSelection::on_egress_ip(const ObjectSet& objects, const std::string& name) {
    auto eip = objects.egress_ips.find(name);
    auto have = selected_.find(name);
    EgressIPSelected fresh;
    if (eip != objects.egress_ips.end()) fresh = select(objects, eip->second);
    if (have != selected_.end()) {
        if (eip != objects.egress_ips.end() && have->second == fresh) return false;
        for (const auto& ns : have->second.namespaces)
            unmatch(ns, name);
        if (eip == objects.egress_ips.end()) {
            selected_.erase(have);
            return true;
        }
    } else if (eip == objects.egress_ips.end()) {
        return false;
    }
    for (const auto& ns : fresh.namespaces)
        match(ns, name);
    selected_.insert_or_assign(name, std::move(fresh));
    return true;
}

void EgressIPSelection::on_namespace(const ObjectSet& objects, const std::string& ns,
                                     std::vector<std::string>& changed) {
    auto nsit = objects.namespaces.find(ns);
    // Named references, not a structured binding: clang 14 (the fuzz build) cannot capture a
    // binding in the lambdas below.
    for (auto& entry : selected_) {
        const std::string& name = entry.first;
        auto& sel = entry.second;
        auto eip = objects.egress_ips.find(name);
        if (eip == objects.egress_ips.end()) continue;  // its own change is on its way
        const bool matches = nsit != objects.namespaces.end() &&
                             selector_matches(eip->second.namespace_selector, nsit->second.meta.labels);
        const bool matched = sel.namespaces.count(ns) > 0;
        if (matches == matched) continue;
        // Even with no pod in it, the namespace counts as a change: the matched namespaces are part
        // of the selection (and of what `show` reports).
        if (matches) {
            sel.namespaces.insert(ns);
            match(ns, name);
            for_each_in_namespace(objects.pods, ns, [&](auto it) {
                const Pod& pod = it->second;
                if (pod_selectable(pod) && selector_matches(eip->second.pod_selector, pod.meta.labels))
                    sel.pods.insert_or_assign(it->first, pod.ips);
            });
        } else {
            sel.namespaces.erase(ns);
            unmatch(ns, name);
            for_each_in_namespace(sel.pods, ns, [&](auto it) { sel.pods.erase(it); });
        }
        changed.push_back(name);
    }
}

void EgressIPSelection::on_pod(const ObjectSet& objects, const std::string& key, std::vector<std::string>& changed) {
    auto matching = by_namespace_.find(namespace_of(key));
    if (matching == by_namespace_.end()) return;
    auto pod = objects.pods.find(key);
    for (const auto& name : matching->second) {
        auto eip = objects.egress_ips.find(name);
        auto sel = selected_.find(name);
        if (eip == objects.egress_ips.end() || sel == selected_.end()) continue;
        const bool selects = pod != objects.pods.end() && pod_selectable(pod->second) &&
                             selector_matches(eip->second.pod_selector, pod->second.meta.labels);
        auto& pods = sel->second.pods;
        auto have = pods.find(key);
        if (selects) {
            if (have != pods.end() && have->second == pod->second.ips) continue;
            pods.insert_or_assign(key, pod->second.ips);
        } else {
            if (have == pods.end()) continue;
            pods.erase(have);
        }
        changed.push_back(name);
    }
}

std::vector<std::string> EgressIPSelection::apply(const ObjectSet& objects, Kind kind, const std::string& key) {
    std::vector<std::string> changed;
    switch (kind) {
    case Kind::egress_ip:
        if (on_egress_ip(objects, key)) changed.push_back(key);
        break;
    case Kind::namespace_:
        on_namespace(objects, key, changed);
        break;
    case Kind::pod:
        on_pod(objects, key, changed);
        break;
    case Kind::egress_service:
    case Kind::service:
    case Kind::endpoint_slice:
    case Kind::node:
    case Kind::lease:
    case Kind::egress_firewall:
        break;
    }
    std::sort(changed.begin(), changed.end());
    return changed;
}

std::vector<std::string> EgressIPSelection::rebuild(const ObjectSet& objects) {
    std::map<std::string, EgressIPSelected> fresh;
    for (const auto& [name, eip] : objects.egress_ips)
        fresh.emplace(name, select(objects, eip));
    std::vector<std::string> changed;
    for (const auto& [name, sel] : fresh) {
        auto old = selected_.find(name);
        if (old == selected_.end() || old->second != sel) changed.push_back(name);
    }
    for (const auto& [name, sel] : selected_)
        if (!fresh.count(name)) changed.push_back(name);
    selected_ = std::move(fresh);
    by_namespace_.clear();
    for (const auto& [name, sel] : selected_)
        for (const auto& ns : sel.namespaces)
            match(ns, name);
    std::sort(changed.begin(), changed.end());
    return changed;
}

const EgressIPSelected* EgressIPSelection::find(const std::string& egress_ip) const {
    auto it = selected_.find(egress_ip);
    return it == selected_.end() ? nullptr : &it->second;
}

std::vector<net::IpAddr> EgressIPSelection::selected_ips(const std::string& egress_ip) const {
    std::vector<net::IpAddr> out;
    if (const EgressIPSelected* sel = find(egress_ip)) {
        for (const auto& [key, ips] : sel->pods)
            out.insert(out.end(), ips.begin(), ips.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace egw::model
