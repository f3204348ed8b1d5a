// SPDX-License-Identifier: Apache-2.0
//
// assign_egress_ips() (control/k8s_source/egress_ip_assignment.h), table-driven: fewest
// addresses first, one address of an object per node, capacity, stickiness, node loss, relabel,
// both families, and addresses no node can host with the reason.
#include <gtest/gtest.h>

#include <cctype>
#include <limits>

#include "control/k8s/client.h"
#include "control/k8s_source/egress_ip_assignment.h"
#include "control/k8s_source/egress_ip_status.h"
#include "tests/unit/k8s/apiserver_process.h"

namespace egw::k8s_source {
namespace {

net::IpAddr ip(const std::string& text) {
    auto a = net::parse_ip(text);
    if (!a) throw std::invalid_argument("bad address in a test: " + text);
    return *a;
}

net::IpPrefix prefix(const std::string& text) {
    auto p = net::parse_prefix(text);
    if (!p) throw std::invalid_argument("bad prefix in a test: " + text);
    return *p;
}

struct Placed {
    std::string node;
    std::string ip;
};

struct EgressIPCase {
    std::string name;
    std::vector<std::string> ips;
    std::vector<Placed> status;  // status.items before
};

struct NodeCase {
    std::string name;
    std::vector<std::string> subnets;
    bool live = true;
    bool assignable = true;
    size_t capacity = std::numeric_limits<size_t>::max();
};

struct Unhostable {
    std::string egress_ip;
    std::string ip;
    std::string reason;
};

struct Case {
    std::string title;
    std::vector<EgressIPCase> egress_ips;
    std::vector<NodeCase> nodes;
    std::map<std::string, std::vector<Placed>> want;  // status.items after, per EgressIP
    std::vector<Unhostable> want_unhostable;
};

using nlohmann::json;

// gtest prints a failing case by its title rather than its bytes.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.title;
}

const std::vector<std::string> kV4 = {"192.0.2.0/24"};
const std::string kNoSubnet = "no node has an outside subnet that contains it";
const std::string kNoCandidate = "no live egress-assignable node has an outside subnet that contains it";
const std::string kOnePerNode = "every node that could host it hosts another address of this EgressIP";
const std::string kFull = "every node that could host it is at capacity";

std::vector<Case> cases() {
    return {
        {"fewest addresses first, ties to the name that sorts first",
         {{"a", {"192.0.2.10"}, {}}, {"b", {"192.0.2.11"}, {}}, {"c", {"192.0.2.12"}, {}}},
         {{"gw-2", kV4}, {"gw-1", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}}}, {"b", {{"gw-2", "192.0.2.11"}}}, {"c", {{"gw-1", "192.0.2.12"}}}},
         {}},
        {"two addresses of one object never share a node",
         {{"a", {"192.0.2.10", "192.0.2.11"}, {}}},
         {{"gw-1", kV4}, {"gw-2", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}, {"gw-2", "192.0.2.11"}}}},
         {}},
        {"a second address with one node left is unhostable, not doubled up",
         {{"a", {"192.0.2.10", "192.0.2.11"}, {}}},
         {{"gw-1", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}}}},
         {{"a", "192.0.2.11", kOnePerNode}}},
        {"capacity: full nodes take nothing more",
         {{"a", {"192.0.2.10"}, {}}, {"b", {"192.0.2.11"}, {}}, {"c", {"192.0.2.12"}, {}}},
         {{"gw-1", kV4, true, true, 1}, {"gw-2", kV4, true, true, 1}},
         {{"a", {{"gw-1", "192.0.2.10"}}}, {"b", {{"gw-2", "192.0.2.11"}}}, {"c", {}}},
         {{"c", "192.0.2.12", kFull}}},
        {"capacity 0 hosts nothing",
         {{"a", {"192.0.2.10"}, {}}},
         {{"gw-1", kV4, true, true, 0}, {"gw-2", kV4}},
         {{"a", {{"gw-2", "192.0.2.10"}}}},
         {}},
        {"an address outside every subnet is unhostable",
         {{"a", {"198.51.100.1", "192.0.2.10"}, {}}},
         {{"gw-1", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}}}},
         {{"a", "198.51.100.1", kNoSubnet}}},
        {"only a dead or unlabelled node holds the subnet: unhostable",
         {{"a", {"192.0.2.10"}, {}}, {"b", {"2001:db8::10"}, {}}},
         {{"gw-1", kV4, false, true}, {"gw-2", {"2001:db8::/64"}, true, false}},
         {{"a", {}}, {"b", {}}},
         {{"a", "192.0.2.10", kNoCandidate}, {"b", "2001:db8::10", kNoCandidate}}},
        {"sticky: an address stays on its node although another has fewer",
         {{"a", {"192.0.2.10"}, {{"gw-2", "192.0.2.10"}}}, {"b", {"192.0.2.11"}, {{"gw-2", "192.0.2.11"}}}},
         {{"gw-1", kV4}, {"gw-2", kV4}, {"gw-3", kV4}},
         {{"a", {{"gw-2", "192.0.2.10"}}}, {"b", {{"gw-2", "192.0.2.11"}}}},
         {}},
        {"node loss: its addresses move to the least loaded live node",
         {{"a", {"192.0.2.10"}, {{"gw-2", "192.0.2.10"}}},
          {"b", {"192.0.2.11"}, {{"gw-1", "192.0.2.11"}}},
          {"c", {"192.0.2.12"}, {{"gw-2", "192.0.2.12"}}}},
         {{"gw-1", kV4}, {"gw-2", kV4, false}, {"gw-3", kV4}},
         {{"a", {{"gw-3", "192.0.2.10"}}}, {"b", {{"gw-1", "192.0.2.11"}}}, {"c", {{"gw-1", "192.0.2.12"}}}},
         {}},
        {"relabel: a node that loses the label gives its addresses up",
         {{"a", {"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}}},
         {{"gw-1", kV4, true, false}, {"gw-2", kV4}},
         {{"a", {{"gw-2", "192.0.2.10"}}}},
         {}},
        {"a node whose subnet no longer holds the address gives it up",
         {{"a", {"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}}},
         {{"gw-1", {"198.51.100.0/24"}}, {"gw-2", kV4}},
         {{"a", {{"gw-2", "192.0.2.10"}}}},
         {}},
        {"both families, each to a node with its subnet",
         {{"a", {"2001:db8::10", "192.0.2.10"}, {}}},
         {{"gw-1", kV4}, {"gw-2", {"2001:db8::/64"}}, {"gw-3", {"192.0.2.0/25", "2001:db8::/64"}}},
         {{"a", {{"gw-2", "2001:db8::10"}, {"gw-1", "192.0.2.10"}}}},
         {}},
        {"sticky addresses keep their room before new ones are placed",
         {{"a", {"192.0.2.10"}, {}}, {"b", {"192.0.2.11"}, {{"gw-1", "192.0.2.11"}}}},
         {{"gw-1", kV4, true, true, 1}, {"gw-2", kV4, true, true, 1}},
         {{"a", {{"gw-2", "192.0.2.10"}}}, {"b", {{"gw-1", "192.0.2.11"}}}},
         {}},
        {"a lowered capacity moves the addresses over it, first names kept",
         {{"a", {"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}}, {"b", {"192.0.2.11"}, {{"gw-1", "192.0.2.11"}}}},
         {{"gw-1", kV4, true, true, 1}, {"gw-2", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}}}, {"b", {{"gw-2", "192.0.2.11"}}}},
         {}},
        {"status that doubles an object up on one node keeps the first address only",
         {{"a", {"192.0.2.10", "192.0.2.11"}, {{"gw-1", "192.0.2.10"}, {"gw-1", "192.0.2.11"}}}},
         {{"gw-1", kV4}, {"gw-2", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}, {"gw-2", "192.0.2.11"}}}},
         {}},
        {"status of addresses left out of spec, or of unknown nodes, is dropped",
         {{"a", {"192.0.2.10"}, {{"gw-1", "192.0.2.99"}, {"gone", "192.0.2.10"}}}},
         {{"gw-1", kV4}},
         {{"a", {{"gw-1", "192.0.2.10"}}}},
         {}},
        {"an address listed twice in status counts once",
         {{"a", {"192.0.2.10"}, {{"gw-2", "192.0.2.10"}, {"gw-1", "192.0.2.10"}}}},
         {{"gw-1", kV4}, {"gw-2", kV4}},
         {{"a", {{"gw-2", "192.0.2.10"}}}},
         {}},
    };
}

class AssignmentTable : public ::testing::TestWithParam<Case> {};

TEST_P(AssignmentTable, Assigns) {
    const Case& c = GetParam();
    std::map<std::string, model::EgressIP> eips;
    for (const auto& e : c.egress_ips) {
        model::EgressIP eip;
        eip.meta.name = e.name;
        for (const auto& a : e.ips)
            eip.egress_ips.push_back(ip(a));
        for (const auto& s : e.status)
            eip.status_items.push_back(model::EgressIPStatusItem{s.node, ip(s.ip)});
        eips.emplace(e.name, eip);
    }
    std::vector<EgressIPNode> nodes;
    for (const auto& n : c.nodes) {
        EgressIPNode node;
        node.name = n.name;
        node.live = n.live;
        node.assignable = n.assignable;
        node.capacity = n.capacity;
        for (const auto& s : n.subnets)
            node.subnets.push_back(prefix(s));
        nodes.push_back(node);
    }

    const EgressIPAssignment got = assign_egress_ips(eips, nodes);

    std::map<std::string, std::vector<model::EgressIPStatusItem>> want;
    std::map<std::string, size_t> want_load;
    for (const auto& [name, placed] : c.want) {
        auto& items = want[name];
        for (const auto& p : placed) {
            items.push_back(model::EgressIPStatusItem{p.node, ip(p.ip)});
            ++want_load[p.node];
        }
    }
    EXPECT_EQ(got.items, want);
    EXPECT_EQ(got.load, want_load);
    std::vector<UnhostableEgressIP> want_unhostable;
    for (const auto& u : c.want_unhostable)
        want_unhostable.push_back(UnhostableEgressIP{u.egress_ip, ip(u.ip), u.reason});
    EXPECT_EQ(got.unhostable, want_unhostable);

    // Fed its own result, it changes nothing: what it writes is stable.
    for (auto& [name, eip] : eips)
        eip.status_items = got.items.at(name);
    const EgressIPAssignment again = assign_egress_ips(eips, nodes);
    EXPECT_EQ(again.items, got.items);
    EXPECT_EQ(again.unhostable, got.unhostable);
}

INSTANTIATE_TEST_SUITE_P(EgressIPAssignment, AssignmentTable, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                             std::string name;
                             for (char ch : info.param.title)
                                 name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                             return std::to_string(info.index) + "_" + name;
                         });

// No node at all: every address is reported, nothing placed.
TEST(EgressIPAssignment, NoNodesReportsEveryAddress) {
    model::EgressIP eip;
    eip.meta.name = "a";
    eip.egress_ips = {ip("192.0.2.10"), ip("2001:db8::10")};
    const EgressIPAssignment got = assign_egress_ips({{"a", eip}}, {});
    EXPECT_TRUE(got.items.at("a").empty());
    ASSERT_EQ(got.unhostable.size(), 2u);
    EXPECT_EQ(got.unhostable[0].reason, kNoSubnet);
    EXPECT_EQ(got.unhostable[1].ip, ip("2001:db8::10"));
}

model::EgressIP egress_ip_with(const std::string& name, const std::vector<std::string>& ips,
                               const std::vector<Placed>& status, const std::string& rv = "7") {
    model::EgressIP eip;
    eip.meta.name = name;
    eip.meta.resource_version = rv;
    for (const auto& a : ips)
        eip.egress_ips.push_back(ip(a));
    for (const auto& s : status)
        eip.status_items.push_back(model::EgressIPStatusItem{s.node, ip(s.ip)});
    return eip;
}

// Only the objects whose pairs changed are written, with what write_egress_ip_status() needs.
TEST(EgressIPAssignment, StatusWritesOnlyWhatChanged) {
    std::map<std::string, model::EgressIP> eips = {
        {"same",
         egress_ip_with("same", {"192.0.2.10", "192.0.2.11"}, {{"gw-1", "192.0.2.10"}, {"gw-2", "192.0.2.11"}})},
        {"reordered",
         egress_ip_with("reordered", {"192.0.2.20", "192.0.2.21"}, {{"gw-2", "192.0.2.21"}, {"gw-1", "192.0.2.20"}})},
        {"moved", egress_ip_with("moved", {"192.0.2.30"}, {{"gw-1", "192.0.2.30"}}, "42")},
        {"new", egress_ip_with("new", {"2001:db8::40"}, {})},
        {"unassigned", egress_ip_with("unassigned", {"192.0.2.50"}, {{"gw-9", "192.0.2.50"}})},
    };
    EgressIPAssignment a;
    a.items["same"] = eips["same"].status_items;
    a.items["reordered"] = {{"gw-1", ip("192.0.2.20")}, {"gw-2", ip("192.0.2.21")}};
    a.items["moved"] = {{"gw-3", ip("192.0.2.30")}};
    a.items["new"] = {{"gw-2", ip("2001:db8::40")}};
    a.items["unassigned"] = {};
    const std::vector<EgressIPStatusWrite> want = {
        {"moved", {ip("192.0.2.30")}, {{"gw-3", ip("192.0.2.30")}}, "42"},
        {"new", {ip("2001:db8::40")}, {{"gw-2", ip("2001:db8::40")}}, "7"},
        {"unassigned", {ip("192.0.2.50")}, {}, "7"},
    };
    EXPECT_EQ(status_writes(eips, a), want);
    // An object the pass did not assign (not in the result) is left alone.
    a.items.erase("moved");
    EXPECT_EQ(status_writes(eips, a).size(), 2u);
}

// An unhostable address is reported once, again when its reason changes, and resolved once.
TEST(EgressIPAssignment, UnhostableAddressesAreReportedOnce) {
    UnhostableReports reports;
    const UnhostableEgressIP full{"a", ip("192.0.2.10"), kFull};
    const UnhostableEgressIP dead{"a", ip("192.0.2.10"), kNoCandidate};
    const UnhostableEgressIP other{"b", ip("2001:db8::1"), kNoSubnet};

    auto d = reports.update({full, other});
    EXPECT_EQ(d.reported, (std::vector<UnhostableEgressIP>{full, other}));
    EXPECT_TRUE(d.resolved.empty());
    d = reports.update({full, other});
    EXPECT_TRUE(d.reported.empty());
    EXPECT_TRUE(d.resolved.empty());
    d = reports.update({dead, other});
    EXPECT_EQ(d.reported, (std::vector<UnhostableEgressIP>{dead}));
    EXPECT_TRUE(d.resolved.empty());
    d = reports.update({other});
    EXPECT_TRUE(d.reported.empty());
    EXPECT_EQ(d.resolved, (std::vector<UnhostableEgressIP>{dead}));
    d = reports.update({});
    EXPECT_EQ(d.resolved, (std::vector<UnhostableEgressIP>{other}));
}

// The status write against the test API server, which serves EgressIP as upstream's CRD does (no
// status subresource): a merge patch of the object, conditional, with a fresh read after a 409.
class EgressIPStatusWriteTest : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<k8s::testing::ApiServerProcess>(std::vector<std::string>{});
        k8s::Credentials c;
        c.server = server_->url();
        c.source = "test";
        client_ = std::make_unique<k8s::Client>(c, k8s::ClientOptions{});
    }
    json stored() {
        auto r = server_->call("GET", "/apis/k8s.ovn.org/v1/egressips/eip");
        return r.status == 200 ? r.body : json();
    }
    void upsert(const std::vector<std::string>& ips, const json& items = nullptr) {
        json o = {{"apiVersion", "k8s.ovn.org/v1"},
                  {"kind", "EgressIP"},
                  {"metadata", {{"name", "eip"}}},
                  {"spec", {{"egressIPs", ips}, {"namespaceSelector", {{"matchLabels", {{"env", "prod"}}}}}}}};
        if (!items.is_null()) o["status"] = {{"items", items}};
        server_->control("upsert", o);
    }
    std::string rv() { return stored()["metadata"]["resourceVersion"]; }
    k8s::WriteResult write(const std::vector<std::string>& ips, const std::vector<Placed>& placed,
                           const std::string& version) {
        std::vector<net::IpAddr> addrs;
        for (const auto& a : ips)
            addrs.push_back(ip(a));
        std::vector<model::EgressIPStatusItem> items;
        for (const auto& p : placed)
            items.push_back(model::EgressIPStatusItem{p.node, ip(p.ip)});
        return write_egress_ip_status(client_->writer(), "eip", addrs, items, version);
    }
    size_t patches() { return server_->requests("patch", "/egressips/eip").size(); }

    std::unique_ptr<k8s::testing::ApiServerProcess> server_;
    std::unique_ptr<k8s::Client> client_;
};

TEST_F(EgressIPStatusWriteTest, WritesItemsWithTheObjectAndLeavesSpecAlone) {
    upsert({"192.0.2.10", "2001:db8::10"});
    k8s::WriteResult w =
        write({"192.0.2.10", "2001:db8::10"}, {{"gw-1", "192.0.2.10"}, {"gw-2", "2001:db8::10"}}, rv());
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_TRUE(w.written);
    const json o = stored();
    EXPECT_EQ(o["status"]["items"], json::parse(R"([{"node":"gw-1","egressIP":"192.0.2.10"},
                                                    {"node":"gw-2","egressIP":"2001:db8::10"}])"));
    EXPECT_EQ(o["spec"]["egressIPs"], json::parse(R"(["192.0.2.10","2001:db8::10"])"));
    // One PATCH of the object itself: there is no /status to write to.
    const auto reqs = server_->requests("patch", "/egressips/eip");
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0]["path"].get<std::string>().find("/status"), std::string::npos);
    // Items that are gone from the assignment are gone from status: the list is replaced whole.
    w = write({"192.0.2.10", "2001:db8::10"}, {{"gw-1", "192.0.2.10"}}, rv());
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_EQ(stored()["status"]["items"], json::parse(R"([{"node":"gw-1","egressIP":"192.0.2.10"}])"));
}

TEST_F(EgressIPStatusWriteTest, AConflictReadsAgainAndWritesOnTheNewVersion) {
    upsert({"192.0.2.10"});
    const std::string old = rv();
    upsert({"192.0.2.10"}, json::parse(R"([{"node":"gw-9","egressIP":"192.0.2.10"}])"));  // someone wrote
    k8s::WriteResult w = write({"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}, old);
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_TRUE(w.written);
    EXPECT_EQ(stored()["status"]["items"], json::parse(R"([{"node":"gw-1","egressIP":"192.0.2.10"}])"));
    EXPECT_EQ(patches(), 2u);  // the 409, then the write on the version read
}

TEST_F(EgressIPStatusWriteTest, AConflictWithTheSameItemsWritesNothing) {
    upsert({"192.0.2.10"});
    const std::string old = rv();
    upsert({"192.0.2.10"}, json::parse(R"([{"node":"gw-1","egressIP":"192.0.2.10"}])"));
    const std::string now = rv();
    k8s::WriteResult w = write({"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}, old);
    ASSERT_TRUE(w.ok()) << w.error;
    EXPECT_FALSE(w.written);
    EXPECT_EQ(rv(), now);
    EXPECT_EQ(patches(), 1u);
}

TEST_F(EgressIPStatusWriteTest, AConflictOnAChangedSpecWritesNothing) {
    upsert({"192.0.2.10"});
    const std::string old = rv();
    upsert({"192.0.2.11"});  // the address changed since the assignment was made
    k8s::WriteResult w = write({"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}, old);
    EXPECT_TRUE(w.conflict());
    EXPECT_FALSE(w.written);
    EXPECT_FALSE(stored().contains("status"));
    EXPECT_EQ(patches(), 1u);
}

TEST_F(EgressIPStatusWriteTest, AGoneEgressIPIsNotFound) {
    k8s::WriteResult w = write({"192.0.2.10"}, {{"gw-1", "192.0.2.10"}}, "");
    EXPECT_TRUE(w.not_found());
    EXPECT_FALSE(w.written);
}

}  // namespace
}  // namespace egw::k8s_source
