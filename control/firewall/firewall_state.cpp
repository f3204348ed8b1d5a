// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewall objects to the published policy, and its hit counts. See firewall_state.h.
#include "control/firewall/firewall_state.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "control/firewall/acl_rules.h"

namespace egw::firewall {

struct EgressFirewallState::Build {
    bool enforce = false;
    bool reject_icmp = false;
    std::vector<std::string> namespaces;  // sorted; firewall id = index + 1
    std::vector<std::string> versions;    // resourceVersion, for the views
    std::vector<std::vector<model::FirewallRule>> rules;
    std::vector<model::FirewallResolution> resolutions;
    std::vector<std::pair<net::IpAddr, uint32_t>> pods;  // pod address -> firewall id, sorted
    std::vector<std::string> ignored;
    bool operator==(const Build&) const = default;
};

namespace {

// The pods a firewall applies to: those that may send (not finished), with addresses of their
// own (a host-network pod's are its node's, and leave through the node, not as a pod).
bool pod_counts(const model::Pod& pod) {
    return !pod.host_network && pod.phase != model::PodPhase::succeeded && pod.phase != model::PodPhase::failed;
}

std::vector<std::string> problems_of(const std::vector<model::FirewallRule>& rules,
                                     const model::FirewallResolution& resolution) {
    std::vector<std::string> out;
    for (size_t i = 0; i < rules.size() && i < resolution.size(); ++i) {
        if (!resolution[i].empty()) continue;
        std::string line = "spec.egress[";
        line += std::to_string(i);
        line += "]: ";
        if (const auto* name = std::get_if<model::FirewallDnsName>(&rules[i].to)) {
            line += name->wildcard ? "wildcard DNS name " : "DNS name ";
            line += name->name;
            line += name->wildcard ? " is not supported yet" : " has no resolved address";
        } else if (std::holds_alternative<model::LabelSelector>(rules[i].to)) {
            line += "nodeSelector matches no node with an InternalIP address";
        } else {
            continue;
        }
        out.push_back(std::move(line));
    }
    return out;
}

}  // namespace

EgressFirewallState::EgressFirewallState(unsigned workers) : workers_(workers) {}

EgressFirewallState::~EgressFirewallState() = default;

bool EgressFirewallState::update(const model::ObjectSet& objects, const DnsAnswers& dns, bool enforce,
                                 bool reject_icmp) {
    auto next = std::make_unique<Build>();
    next->enforce = enforce;
    next->reject_icmp = reject_icmp;
    model::EgressFirewallSelection sel = model::select_egress_firewalls(objects.egress_firewalls);
    next->ignored = std::move(sel.ignored);
    std::map<std::string, uint32_t> id_of;
    for (const auto& [ns, fw] : sel.by_namespace) {  // a std::map: sorted by namespace
        next->namespaces.push_back(ns);
        next->versions.push_back(fw->meta.resource_version);
        next->rules.push_back(fw->rules);
        next->resolutions.push_back(model::resolve_egress_firewall(fw->rules, dns, objects.nodes));
        id_of[ns] = static_cast<uint32_t>(next->namespaces.size());
    }
    if (!id_of.empty()) {
        for (const auto& [key, pod] : objects.pods) {
            auto it = id_of.find(pod.meta.namespace_);
            if (it == id_of.end() || !pod_counts(pod)) continue;
            for (const net::IpAddr& ip : pod.ips)
                next->pods.emplace_back(ip, it->second);
        }
        std::sort(next->pods.begin(), next->pods.end());
        // Two pods never share an address at once; if a stale pod still claims one, one id wins.
        next->pods.erase(std::unique(next->pods.begin(), next->pods.end(),
                                     [](const auto& a, const auto& b) { return a.first == b.first; }),
                         next->pods.end());
    }
    if (last_ && *last_ == *next) return false;

    std::shared_ptr<dp::EgressFirewallPolicy> policy;
    std::string error;
    const auto started = std::chrono::steady_clock::now();
    if (enforce && !next->namespaces.empty()) {
        std::vector<NamespaceFirewall> input;
        for (size_t i = 0; i < next->namespaces.size(); ++i)
            input.push_back(NamespaceFirewall{next->namespaces[i], &next->rules[i], next->resolutions[i]});
        const std::vector<dp::FirewallAclRule> acl = expand_acl_rules(input);
        policy = std::make_shared<dp::EgressFirewallPolicy>();
        policy->version = next_version_;
        policy->reject_icmp = reject_icmp;
        policy->table = dp::EgressFirewallTable::build(acl.data(), acl.size(), next_version_, &error);
        if (!policy->table) {
            std::lock_guard lock(mu_);
            error_ = error;
            return false;  // the rules in force stay; the next change tries again
        }
        policy->rule_count.assign(next->namespaces.size() + 1, 0);
        for (size_t i = 0; i < next->rules.size(); ++i)
            policy->rule_count[i + 1] = static_cast<uint32_t>(next->rules[i].size());
        policy->size_hits(workers_);
        std::vector<std::pair<uint64_t, uint32_t>> pods4;
        std::vector<dp::Ip6Map::Item> pods6;
        for (const auto& [ip, id] : next->pods) {
            if (ip.is_v4()) {
                pods4.emplace_back(ip.v4(), id);
            } else {
                dp::Ip6Map::Item item{};
                std::copy(ip.bytes().begin(), ip.bytes().end(), item.addr);
                item.value = id;
                pods6.push_back(item);
            }
        }
        policy->pods.build(pods4);
        policy->pods6.build(pods6);
        ++next_version_;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    std::vector<NamespaceFirewallView> views;
    for (size_t i = 0; i < next->namespaces.size(); ++i) {
        NamespaceFirewallView v;
        v.namespace_ = next->namespaces[i];
        v.resource_version = next->versions[i];
        v.rules = next->rules[i];
        v.resolution = next->resolutions[i];
        v.problems = problems_of(v.rules, v.resolution);
        for (const auto& [ip, id] : next->pods)
            v.pod_ips += id == i + 1;
        views.push_back(std::move(v));
    }

    std::lock_guard lock(mu_);
    current_ = policy;
    if (policy) {
        Published p{policy, next->namespaces, next->rules};
        live_.insert(live_.begin(), std::move(p));
    }
    views_ = std::move(views);
    ignored_ = next->ignored;
    error_.clear();
    enforcing_ = enforce;
    build_seconds_ = seconds;
    last_ = std::move(next);
    return true;
}

void EgressFirewallState::add_hits(const Published& p, std::map<std::string, Totals>& totals) const {
    const dp::EgressFirewallPolicy& pol = *p.policy;
    for (size_t i = 0; i < p.namespaces.size(); ++i) {
        const auto id = static_cast<uint32_t>(i + 1);
        Totals& t = totals[p.namespaces[i]];
        if (t.rules != p.rules[i] || t.rule_hits.size() != p.rules[i].size()) {
            // Another rule set: its indexes name other rules, so its per-rule hits start over.
            t.rules = p.rules[i];
            t.rule_hits.assign(p.rules[i].size(), 0);
        }
        for (uint32_t r = 0; r <= pol.rule_count[id]; ++r) {
            const uint64_t n = pol.hits(pol.slot_base[id] + r);
            if (r == pol.rule_count[id]) {
                t.allowed += n;
                continue;
            }
            if (p.rules[i][r].action == model::FirewallAction::deny)
                t.denied += n;
            else
                t.allowed += n;
            t.rule_hits[r] += n;
        }
    }
}

void EgressFirewallState::collect() {
    std::lock_guard lock(mu_);
    // Oldest first, as views() adds them. A retired policy only this state still holds is in no
    // snapshot, so no worker can write its hits again.
    for (size_t i = live_.size(); i-- > 0;) {
        if (live_[i].policy == current_ || live_[i].policy.use_count() > 1) continue;
        add_hits(live_[i], folded_);
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

std::vector<NamespaceFirewallView> EgressFirewallState::views() const {
    std::lock_guard lock(mu_);
    std::map<std::string, Totals> totals = folded_;
    // Oldest first, so that a namespace's per-rule hits follow its rules as they changed.
    for (auto it = live_.rbegin(); it != live_.rend(); ++it)
        add_hits(*it, totals);
    std::vector<NamespaceFirewallView> out = views_;
    for (NamespaceFirewallView& v : out) {
        auto t = totals.find(v.namespace_);
        v.rule_hits.assign(v.rules.size(), 0);
        if (t == totals.end()) continue;
        v.denied = t->second.denied;
        v.allowed = t->second.allowed;
        if (t->second.rules == v.rules) v.rule_hits = t->second.rule_hits;
    }
    return out;
}

std::vector<std::string> EgressFirewallState::ignored() const {
    std::lock_guard lock(mu_);
    return ignored_;
}

std::string EgressFirewallState::last_error() const {
    std::lock_guard lock(mu_);
    return error_;
}

bool EgressFirewallState::enforcing() const {
    std::lock_guard lock(mu_);
    return enforcing_;
}

double EgressFirewallState::last_build_seconds() const {
    std::lock_guard lock(mu_);
    return build_seconds_;
}

std::string describe_destination(const model::FirewallRule& rule) {
    std::string out;
    if (const auto* cidr = std::get_if<net::IpPrefix>(&rule.to)) {
        out = "cidrSelector ";
        out += net::to_string(*cidr);
        return out;
    }
    if (const auto* name = std::get_if<model::FirewallDnsName>(&rule.to)) {
        out = "dnsName ";
        out += name->name;
        return out;
    }
    const auto& sel = std::get<model::LabelSelector>(rule.to);
    std::string terms;
    auto next = [&terms] {
        if (!terms.empty()) terms += ',';
    };
    for (const auto& [k, v] : sel.match_labels) {
        next();
        terms += k;
        terms += '=';
        terms += v;
    }
    for (const auto& e : sel.match_expressions) {
        next();
        terms += e.key;
        terms += ' ';
        terms += e.op;
        if (e.values.empty()) continue;
        terms += " (";
        for (size_t i = 0; i < e.values.size(); ++i) {
            if (i) terms += ',';
            terms += e.values[i];
        }
        terms += ')';
    }
    out = "nodeSelector ";
    out += terms.empty() ? "{}" : terms;
    return out;
}

std::string describe_ports(const model::FirewallRule& rule) {
    std::string out;
    for (const model::FirewallPort& p : rule.ports) {
        const char* proto = p.protocol == 6 ? "TCP" : p.protocol == 17 ? "UDP" : "SCTP";
        if (!out.empty()) out += ", ";
        out += proto;
        if (p.port) {
            out += '/';
            out += std::to_string(p.port);
        }
    }
    return out;
}

nlohmann::json to_json(const EgressFirewallState& state, bool reject_icmp) {
    using nlohmann::json;
    json namespaces = json::array();
    for (const NamespaceFirewallView& v : state.views()) {
        json rules = json::array();
        for (size_t i = 0; i < v.rules.size(); ++i) {
            json addresses = json::array();
            if (i < v.resolution.size())
                for (const net::IpPrefix& p : v.resolution[i])
                    addresses.push_back(net::to_string(p));
            rules.push_back({{"index", i},
                             {"type", model::to_string(v.rules[i].action)},
                             {"to", describe_destination(v.rules[i])},
                             {"ports", describe_ports(v.rules[i])},
                             {"addresses", addresses},
                             {"hits", i < v.rule_hits.size() ? v.rule_hits[i] : 0}});
        }
        namespaces.push_back({{"namespace", v.namespace_},
                              {"resource_version", v.resource_version},
                              {"status", v.problems.empty() ? "EgressFirewall Rules applied"
                                                            : "EgressFirewall Rules not correctly applied"},
                              {"pod_ips", v.pod_ips},
                              {"denied", v.denied},
                              {"allowed", v.allowed},
                              {"problems", v.problems},
                              {"rules", rules}});
    }
    return {{"enforcing", state.enforcing()},
            {"reject", reject_icmp ? "icmp" : "drop"},
            {"build_ms", state.last_build_seconds() * 1e3},
            {"error", state.last_error()},
            {"ignored", state.ignored()},
            {"namespaces", namespaces}};
}

}  // namespace egw::firewall
