// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_watch.h.
#include "control/k8s_source/egress_ip_watch.h"

#include <set>

#include "control/k8s/log.h"

namespace egw::k8s_source {

std::vector<model::Kind> EgressIPWatch::kinds() {
    return {model::Kind::egress_ip, model::Kind::namespace_, model::Kind::pod, model::Kind::egress_firewall};
}

EgressIPWatch::EgressIPWatch(k8s::Credentials creds, k8s::ClientOptions opts)
    : client_(std::make_unique<k8s::Client>(std::move(creds), std::move(opts))) {
    client_->cache().set_listener([this](const k8s::Change& c) { on_change(c); });
}

EgressIPWatch::~EgressIPWatch() {
    stop();
}

void EgressIPWatch::start() {
    client_->start(kinds());
    sync_logger_ = std::thread([this] { log_when_synced(); });
}

void EgressIPWatch::stop() {
    stopping_ = true;
    if (sync_logger_.joinable()) sync_logger_.join();
    client_->stop();
}

void EgressIPWatch::log_when_synced() {
    while (!stopping_) {
        if (!client_->wait_synced(std::chrono::milliseconds(200))) continue;
        std::lock_guard lk(mu_);
        client_->cache().read([&](const model::ObjectSet& objs) {
            // The cache says it is synced before it hands the last list's changes to on_change(),
            // so the selection may not hold them yet: select from what was listed, and the late
            // changes then find nothing to change.
            selection_changes_ += selection_.rebuild(objs).size();
            k8s::logger()->info("k8s: EgressIP sources listed: {} EgressIP(s), {} namespace(s), {} pod(s)",
                                objs.egress_ips.size(), objs.namespaces.size(), objs.pods.size());
            for (const auto& [name, eip] : objs.egress_ips)
                log_egress_ip(objs, name);
        });
        synced_logged_ = true;
        firewall_changes_.fetch_add(1, std::memory_order_release);
        return;
    }
}

void EgressIPWatch::log_egress_ip(const model::ObjectSet& objs, const std::string& name) {
    auto eip = objs.egress_ips.find(name);
    if (eip == objs.egress_ips.end()) {
        // The sync logger may have spoken for this state already (see on_change()).
        if (logged_versions_.erase(name)) k8s::logger()->info("k8s: EgressIP {} is gone", name);
        return;
    }
    std::string& logged = logged_versions_[name];
    if (logged == eip->second.meta.resource_version) return;
    logged = eip->second.meta.resource_version;
    const model::EgressIPSelected* sel = selection_.find(name);
    std::string ips;
    for (const auto& ip : eip->second.egress_ips) {
        // Appended piece by piece: `const char* + std::string` makes gcc 12 warn
        // (-Wstringop-overflow, a false positive) when the function is inlined under LTO.
        if (!ips.empty()) ips += ", ";
        ips += net::to_string(ip);
    }
    k8s::logger()->info("k8s: EgressIP {} ({}) selects {} pod(s) in {} namespace(s) (not served yet)", name,
                        ips.empty() ? "no address" : ips, sel ? sel->pods.size() : 0, sel ? sel->namespaces.size() : 0);
}

void EgressIPWatch::on_change(const k8s::Change& c) {
    if (c.kind == model::Kind::egress_firewall || c.kind == model::Kind::pod)
        firewall_changes_.fetch_add(1, std::memory_order_release);
    if (c.kind == model::Kind::egress_firewall) return;  // no part of EgressIP selection
    std::lock_guard lk(mu_);
    client_->cache().read([&](const model::ObjectSet& objs) {
        const std::vector<std::string> changed = selection_.apply(objs, c.kind, c.key);
        selection_changes_ += changed.size();
        // An EgressIP's own change is worth a line; the pods and namespaces that move its
        // selection are many, and show in the counts. Before the first lists are all in, the
        // sync logger speaks for them. The cache says it is synced before it hands the last
        // list's changes here, so a change may reach this after the sync logger logged the same
        // version: log_egress_ip() says each version once.
        if (c.kind == model::Kind::egress_ip && synced_logged_) log_egress_ip(objs, c.key);
    });
    if (c.kind == model::Kind::egress_ip && egress_ip_listener_) egress_ip_listener_();
}

EgressIPWatchStats EgressIPWatch::stats() const {
    EgressIPWatchStats s;
    s.synced = client_->synced();
    std::lock_guard lk(mu_);
    s.selection_changes = selection_changes_;
    client_->cache().read([&](const model::ObjectSet& objs) {
        s.egress_ip_objects = objs.egress_ips.size();
        s.namespaces = objs.namespaces.size();
        s.pods = objs.pods.size();
        for (const auto& [name, eip] : objs.egress_ips) {
            EgressIPSelectedStats e;
            e.name = name;
            for (const auto& ip : eip.egress_ips)
                e.egress_ips.push_back(net::to_string(ip));
            for (const auto& item : eip.status_items)
                e.assigned.emplace_back(net::to_string(item.egress_ip), item.node);
            if (const model::EgressIPSelected* sel = selection_.find(name)) {
                e.namespaces = sel->namespaces.size();
                e.pods = sel->pods.size();
                for (const auto& [key, ips] : sel->pods)
                    e.pod_ips += ips.size();
            }
            s.selected.push_back(std::move(e));
        }
    });
    return s;
}

std::vector<AssignedEgressIP> assigned_to(const model::ObjectSet& objs, const std::string& node) {
    std::vector<AssignedEgressIP> out;
    for (const auto& [name, eip] : objs.egress_ips) {
        for (const auto& ip : eip.egress_ips) {
            for (const auto& item : eip.status_items) {
                if (item.egress_ip != ip) continue;
                if (item.node == node) out.push_back(AssignedEgressIP{name, ip});
                break;  // only the first item of an address counts
            }
        }
    }
    return out;
}

std::vector<AssignedEgressIP> EgressIPWatch::assigned_to(const std::string& node) const {
    return client_->cache().read([&](const model::ObjectSet& objs) { return k8s_source::assigned_to(objs, node); });
}

void EgressIPWatch::copy_firewall_objects(model::ObjectSet& out) const {
    client_->cache().read([&](const model::ObjectSet& objs) {
        out.egress_firewalls = objs.egress_firewalls;
        out.pods.clear();
        std::set<std::string> namespaces;
        for (const auto& [key, fw] : objs.egress_firewalls)
            namespaces.insert(fw.meta.namespace_);
        for (const auto& [key, pod] : objs.pods)
            if (namespaces.count(pod.meta.namespace_)) out.pods.emplace(key, pod);
    });
}

std::vector<net::IpAddr> EgressIPWatch::selected_ips(const std::string& egress_ip) const {
    std::lock_guard lk(mu_);
    return selection_.selected_ips(egress_ip);
}

nlohmann::json to_json(const EgressIPWatchStats& s) {
    nlohmann::json selected = nlohmann::json::array();
    for (const auto& e : s.selected) {
        nlohmann::json assigned = nlohmann::json::array();
        for (const auto& [ip, node] : e.assigned)
            assigned.push_back({{"egress_ip", ip}, {"node", node}});
        selected.push_back({{"name", e.name},
                            {"egress_ips", e.egress_ips},
                            {"assigned", assigned},
                            {"namespaces", e.namespaces},
                            {"pods", e.pods},
                            {"pod_ips", e.pod_ips}});
    }
    return {{"synced", s.synced},         {"served", false}, {"objects", s.egress_ip_objects},
            {"namespaces", s.namespaces}, {"pods", s.pods},  {"selection_changes", s.selection_changes},
            {"selected", selected}};
}

}  // namespace egw::k8s_source
