// SPDX-License-Identifier: Apache-2.0
//
// EgressIP sources (docs/kubernetes.md, "EgressIP"): EgressIPs, Namespaces and Pods, listed and
// watched with the same reflectors as the EgressService kinds (bookmarks, relist on 410, backoff),
// and which pods each EgressIP selects, kept up to date one change at a time.
//
// It has a k8s::Client of its own, so that the EgressService path is untouched by it: a cluster
// without the EgressIP CRD, or RBAC without pods, costs failing reflectors here (logged once per
// streak, shown by `show k8s`) and nothing else; the EgressService cache never holds the pods, and
// its sync, liveness and decisions do not wait for them.
//
// Nothing is programmed into the data plane yet: the selection is kept, logged once every kind
// has been listed (one line per EgressIP) and then whenever an EgressIP changes, and reported by
// stats() (`show k8s`, key "egress_ips").
//
// The same client lists and watches EgressFirewalls (namespaced): their enforcement needs the pods
// this watch keeps. copy_firewall_objects() hands egwd's control thread what it compiles, and
// firewall_changes() tells it when to look again (control/firewall/firewall_state.h).
//
// Threads: the client's reflectors call on_change(), serialised by a mutex; a thread of its own
// waits for the first lists to log what they brought; stats() may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/k8s/client.h"
#include "control/model/egress_ip_selection.h"

namespace egw::k8s_source {

struct EgressIPSelectedStats {
    std::string name;
    std::vector<std::string> egress_ips;  // spec.egressIPs, canonical text
    size_t namespaces = 0;                // matched by namespaceSelector
    size_t pods = 0;                      // selected pods
    size_t pod_ips = 0;                   // their addresses
    // status.items as the object says: (address, node), canonical text, in the object's order.
    std::vector<std::pair<std::string, std::string>> assigned;
};

// One address status.items assigns to a node, with the EgressIP that holds it.
struct AssignedEgressIP {
    std::string egress_ip;  // the object's name
    net::IpAddr ip;
    bool operator==(const AssignedEgressIP&) const = default;
};

// The addresses status.items assigns to `node` in `objs`, by EgressIP name then spec order: only
// those spec.egressIPs still holds, each once (a second item for an address does not count, as
// for assign_egress_ips()).
std::vector<AssignedEgressIP> assigned_to(const model::ObjectSet& objs, const std::string& node);

struct EgressIPWatchStats {
    bool synced = false;  // the three kinds have been listed once
    size_t egress_ip_objects = 0;
    size_t namespaces = 0;
    size_t pods = 0;
    uint64_t selection_changes = 0;               // EgressIPs whose selection changed, summed over changes
    std::vector<EgressIPSelectedStats> selected;  // by name
};

class EgressIPWatch {
public:
    static std::vector<model::Kind> kinds();  // EgressIP, Namespace, Pod, EgressFirewall

    // Throws k8s::CredentialError as k8s::Client does.
    EgressIPWatch(k8s::Credentials creds, k8s::ClientOptions opts);
    ~EgressIPWatch();
    EgressIPWatch(const EgressIPWatch&) = delete;
    EgressIPWatch& operator=(const EgressIPWatch&) = delete;

    void start();
    void stop();

    EgressIPWatchStats stats() const;
    // The pod addresses one EgressIP selects, sorted (empty when unknown).
    std::vector<net::IpAddr> selected_ips(const std::string& egress_ip) const;
    k8s::Client& client() { return *client_; }
    const k8s::Client& client() const { return *client_; }
    // The EgressIP addresses this gateway is to serve: what status.items assigns to `node`, as the
    // watch last saw it, whoever wrote it (egw's leader, or OVN-Kubernetes' cluster manager under
    // --election=external). This is what the data path will translate to and answer ARP/ND for.
    std::vector<AssignedEgressIP> assigned_to(const std::string& node) const;
    // Called on a reflector's thread after every change of an EgressIP (not of a pod or namespace).
    // Set it before start().
    void set_egress_ip_listener(std::function<void()> listener) { egress_ip_listener_ = std::move(listener); }

    // Moves whenever an EgressFirewall or a pod changed (and once when the kinds are first listed).
    uint64_t firewall_changes() const { return firewall_changes_.load(std::memory_order_acquire); }
    // Every EgressFirewall, and the pods of the namespaces that have one, into `out` (its other
    // maps untouched), copied under the cache's lock.
    void copy_firewall_objects(model::ObjectSet& out) const;

private:
    void on_change(const k8s::Change& c);
    void log_when_synced();
    // Caller holds mu_. Says nothing for a version (or an absence) already said.
    void log_egress_ip(const model::ObjectSet& objs, const std::string& name);

    std::unique_ptr<k8s::Client> client_;
    mutable std::mutex mu_;  // guards selection_, the counters and synced_logged_
    model::EgressIPSelection selection_;
    uint64_t selection_changes_ = 0;
    bool synced_logged_ = false;  // the first lists have been logged: log each EgressIP change
    // The resourceVersion of each EgressIP whose line was logged last (guarded by mu_).
    std::map<std::string, std::string> logged_versions_;
    std::function<void()> egress_ip_listener_;
    std::thread sync_logger_;
    std::atomic<bool> stopping_{false};
    std::atomic<uint64_t> firewall_changes_{0};
};

// stats() as JSON, for `show k8s`.
nlohmann::json to_json(const EgressIPWatchStats& s);

}  // namespace egw::k8s_source
