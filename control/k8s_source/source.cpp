// SPDX-License-Identifier: Apache-2.0
#include "control/k8s_source/source.h"

#include <stdexcept>

#include "control/k8s/credentials.h"

namespace egw::k8s_source {

std::optional<config::Election> parse_election(const std::string& s) {
    if (s == "leader") return config::Election::leader;
    if (s == "external") return config::Election::external;
    return std::nullopt;
}

std::unique_ptr<Controller> make_source(const config::Config& cfg, const std::string& kubeconfig_flag,
                                        std::optional<config::Election> election_flag) {
    if (cfg.node.name.empty())
        throw std::invalid_argument(cfg.file + ": $.node.name: the kubernetes source needs this gateway's node name");
    const std::string& kubeconfig = kubeconfig_flag.empty() ? cfg.state.kubeconfig : kubeconfig_flag;
    k8s::Credentials creds = k8s::load_credentials(kubeconfig);

    ControllerOptions o;
    o.node_name = cfg.node.name;
    o.lease_namespace = cfg.state.lease_namespace;
    o.election = election_flag.value_or(cfg.state.election) == config::Election::external ? ElectionMode::external
                                                                                          : ElectionMode::leader;
    o.lease_duration = std::chrono::seconds(cfg.state.lease_duration_s);
    o.renew_deadline = std::chrono::milliseconds(cfg.state.renew_deadline_ms);
    o.retry_period = std::chrono::milliseconds(cfg.state.retry_period_ms);
    o.pod_cidrs = cfg.cluster.pod_cidrs;
    o.watch_egress_ips = true;
    // VLANs are ports of the configuration too, with a role of their own.
    for (const config::PortConfig& p : cfg.ports)
        if (p.role == config::PortRole::outside)
            o.outside_prefixes.insert(o.outside_prefixes.end(), p.addresses.begin(), p.addresses.end());
    if (cfg.egress_ip.capacity) o.egress_ip_capacity = *cfg.egress_ip.capacity;

    k8s::ClientOptions co;
    co.http.user_agent = "egwd/" + cfg.node.name;
    co.reflector.refusal_grace = std::chrono::milliseconds(cfg.state.refusal_grace_ms);
    return std::make_unique<Controller>(std::move(creds), std::move(o), std::move(co));
}

nlohmann::json describe(Controller& c) {
    ControllerStats st = c.stats();
    nlohmann::json resources = nlohmann::json::array();
    auto add = [&resources](const std::vector<k8s::ReflectorStatus>& reflectors) {
        for (const auto& r : reflectors)
            resources.push_back({{"name", r.name},
                                 {"resource", r.resource},
                                 {"synced", r.synced},
                                 {"watching", r.watching},
                                 {"failing", r.failing},
                                 {"resource_version", r.resource_version},
                                 {"lists", r.lists},
                                 {"list_failures", r.list_failures},
                                 {"expired", r.expired},
                                 {"watches", r.watches},
                                 {"watch_closed", r.watch_closed},
                                 {"watch_failures", r.watch_failures},
                                 {"events", r.events},
                                 {"bookmarks", r.bookmarks},
                                 {"failures", r.failures},
                                 {"current_until", r.current_until},
                                 {"last_error", r.last_error}});
    };
    add(c.client().status());
    // EgressIP's reflectors are listed with the others; null when the source does not watch them.
    nlohmann::json egress_ips = nullptr;
    if (EgressIPWatch* w = c.egress_ips()) {
        egress_ips = to_json(w->stats());
        add(w->client().status());
        nlohmann::json here = nlohmann::json::array();
        for (const auto& a : c.assigned_egress_ips())
            here.push_back({{"name", a.egress_ip}, {"egress_ip", net::to_string(a.ip)}});
        egress_ips["assigned_here"] = here;
        // The leader's assignment; null on a follower's view of it and under --election=external.
        nlohmann::json assigning = nullptr;
        if (const EgressIPLeader* l = c.egress_ip_leader(); l && st.leader) {
            const EgressIPLeaderStats ls = l->stats();
            nlohmann::json unhostable = nlohmann::json::array();
            for (const auto& u : ls.unhostable)
                unhostable.push_back(
                    {{"name", u.egress_ip}, {"egress_ip", net::to_string(u.ip)}, {"reason", u.reason}});
            nlohmann::json problems = nlohmann::json::object();
            for (const auto& [node, why] : ls.node_problems)
                problems[node] = why;
            assigning = {{"deciding", ls.deciding},           {"passes", ls.passes},
                         {"status_writes", ls.status_writes}, {"write_failures", ls.write_failures},
                         {"unhostable", unhostable},          {"node_problems", problems}};
        }
        egress_ips["assignment"] = assigning;
    }
    return {{"synced", st.synced},
            {"leader", st.leader},
            {"leader_identity", st.leader_identity},
            {"deciding", st.deciding},
            {"serving", st.not_serving.empty()},
            {"not_serving", st.not_serving},
            {"decision_pauses", st.pauses},
            {"election", to_string(c.options().election)},
            {"live_nodes", st.live_nodes},
            {"allocations", st.allocations},
            {"status_writes", st.status_writes},
            {"label_writes", st.label_writes},
            {"write_failures", st.write_failures},
            {"lease_renewals", st.lease_renewals},
            {"leader_transitions", st.leader_transitions},
            {"resources", resources},
            {"egress_ips", egress_ips}};
}

}  // namespace egw::k8s_source
