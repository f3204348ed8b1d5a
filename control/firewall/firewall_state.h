// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewallState: from the EgressFirewall objects a state source holds to the
// EgressFirewallPolicy the workers enforce (dataplane/tables/egress_firewall.h), and what egwd
// says about it (docs/kubernetes.md, "EgressFirewall").
//
// update() selects the objects that apply (model::select_egress_firewalls), resolves each rule's
// destination (CIDRs as written, node selectors to the matching Nodes' InternalIP addresses, DNS
// names to the addresses a resolver gave: the DnsAnswers seam), collects the addresses of every
// pod of a namespace with a firewall, and compiles a new policy when any of that differs from the
// last build; the caller publishes it with the next policy snapshot. Nothing here waits for DNS: a
// name without answers matches nothing until answers come and update() is called again.
//
// Hits: each published policy has per-worker hit rows. A policy that no snapshot holds any more
// (its last snapshot freed after the RCU grace period, so no worker can write it) is folded into
// per-namespace totals by collect(); until then its rows are read live. Per-rule hits survive a
// rebuild only while the namespace's rules stay the same (a rule index names another rule after
// a change); the namespace's denied and allowed totals only grow.
//
// Threads: update() and collect() on the control thread; the readers (views(), totals()) from
// any thread (the CLI, the metrics thread), under the state's mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/ip.h"
#include "control/model/egress_firewall.h"
#include "dataplane/tables/egress_firewall.h"

namespace egw::firewall {

// The addresses each DNS name stands for now, keyed by model::FirewallDnsName::name. A resolver
// fills it; until one is wired into egwd it is empty, and every dnsName rule matches nothing.
using DnsAnswers = std::map<std::string, std::vector<net::IpAddr>>;

// One namespace's firewall as applied, for the CLI, the status file and the metrics.
struct NamespaceFirewallView {
    std::string namespace_;
    std::string resource_version;
    std::vector<model::FirewallRule> rules;
    model::FirewallResolution resolution;  // index for index with rules
    std::vector<uint64_t> rule_hits;       // flows each rule decided, this rule set
    uint64_t denied = 0;                   // flows denied since egwd started
    uint64_t allowed = 0;                  // flows allowed (by a rule or by default)
    size_t pod_ips = 0;                    // pod addresses it applies to
    // Rules that match nothing for a reason the operator may fix ("spec.egress[3]: DNS name
    // example.com has no address yet").
    std::vector<std::string> problems;
};

class EgressFirewallState {
public:
    explicit EgressFirewallState(unsigned workers);
    ~EgressFirewallState();
    EgressFirewallState(const EgressFirewallState&) = delete;
    EgressFirewallState& operator=(const EgressFirewallState&) = delete;

    // Rebuilds from `objects` (its egress_firewalls, pods and nodes) when what they decide
    // changed, or `enforce`/`reject_icmp` did. Returns true when policy() is a new one to publish.
    // A table rte_acl cannot build leaves the old policy in force and says why in last_error().
    bool update(const model::ObjectSet& objects, const DnsAnswers& dns, bool enforce, bool reject_icmp);

    // The policy to publish (null: no firewall in force, or enforcement off).
    std::shared_ptr<const dp::EgressFirewallPolicy> policy() const { return current_; }

    // Folds the hits of policies no snapshot holds any more. Control thread, after publications.
    void collect();

    std::vector<NamespaceFirewallView> views() const;
    std::vector<std::string> ignored() const;
    std::string last_error() const;
    bool enforcing() const;
    double last_build_seconds() const;

private:
    struct Build;  // the inputs one build was made from
    struct Totals {
        std::vector<model::FirewallRule> rules;  // the rules rule_hits count for
        std::vector<uint64_t> rule_hits;
        uint64_t denied = 0;
        uint64_t allowed = 0;
    };
    struct Published {
        std::shared_ptr<const dp::EgressFirewallPolicy> policy;
        std::vector<std::string> namespaces;  // by firewall id - 1
        std::vector<std::vector<model::FirewallRule>> rules;
    };

    // Caller holds mu_. Adds a policy's live hits into `totals` (namespace by namespace).
    void add_hits(const Published& p, std::map<std::string, Totals>& totals) const;

    unsigned workers_;
    uint32_t next_version_ = 1;
    std::shared_ptr<const dp::EgressFirewallPolicy> current_;
    std::unique_ptr<Build> last_;
    mutable std::mutex mu_;        // guards everything below
    std::vector<Published> live_;  // current_ first when set, then retired ones still held
    std::map<std::string, Totals> folded_;
    std::vector<NamespaceFirewallView> views_;  // by namespace; counts filled by views()
    std::vector<std::string> ignored_;
    std::string error_;
    bool enforcing_ = false;
    double build_seconds_ = 0;
};

// What a rule's destination and ports say, as written ("cidrSelector 192.0.2.0/24",
// "dnsName example.com", "nodeSelector role=db"; "TCP/80, UDP" or "" for every protocol).
std::string describe_destination(const model::FirewallRule& rule);
std::string describe_ports(const model::FirewallRule& rule);

// The state for `show egressfirewall` and the status file: {"enforcing", "reject" ("drop" or
// "icmp"), "build_ms", "error", "ignored": [...], "namespaces": [{"namespace",
// "resource_version", "status" ("EgressFirewall Rules applied" or "... not correctly applied"),
// "pod_ips", "denied", "allowed", "problems": [...], "rules": [{"index", "type", "to", "ports",
// "addresses": [...], "hits"}]}]}.
nlohmann::json to_json(const EgressFirewallState& state, bool reject_icmp);

}  // namespace egw::firewall
