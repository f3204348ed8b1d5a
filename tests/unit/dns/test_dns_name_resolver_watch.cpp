// SPDX-License-Identifier: Apache-2.0
//
// DnsNameResolverWatch (control/dns/dns_name_resolver_watch.h) against the test API server
// (tests/apiserver/apiserver.py, which serves the DNSNameResolver CRD's shape): objects listed at
// start, a status written later, an object deleted, one the parser refuses (logged once and left
// out while the others count).
#include "control/dns/dns_name_resolver_watch.h"

#include <gtest/gtest.h>

#include "tests/unit/k8s/apiserver_process.h"

namespace {

using namespace egw::dns;
using namespace egw::k8s::testing;
using egw::net::IpAddr;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNamespace = "openshift-ovn-kubernetes";

IpAddr ip(const char* s) {
    return *egw::net::parse_ip(s);
}

json resolver(const std::string& name, const std::string& spec_name, json resolved_names = nullptr) {
    json j = {{"apiVersion", "network.openshift.io/v1alpha1"},
              {"kind", "DNSNameResolver"},
              {"metadata", {{"name", name}, {"namespace", kNamespace}}},
              {"spec", {{"name", spec_name}}}};
    if (!resolved_names.is_null()) j["status"] = {{"resolvedNames", resolved_names}};
    return j;
}

json resolved(const std::string& dns_name, std::vector<const char*> ips) {
    json addrs = json::array();
    for (const char* a : ips)
        addrs.push_back({{"ip", a}, {"ttlSeconds", 30}, {"lastLookupTime", "2024-05-01T10:00:00Z"}});
    return {{"dnsName", dns_name}, {"resolvedAddresses", addrs}};
}

class DnsNameResolverWatchTest : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<ApiServerProcess>();
        egw::k8s::Credentials c;
        c.server = server_->url();
        c.source = "test";
        transport_ = std::make_shared<egw::k8s::Transport>(c);
    }
    void TearDown() override {
        watch_.reset();
        server_.reset();
    }
    void start() {
        egw::k8s::ReflectorOptions o;
        o.backoff_initial = 50ms;
        o.backoff_max = 400ms;
        watch_ = std::make_unique<DnsNameResolverWatch>(transport_, "", o);
        watch_->start();
        ASSERT_TRUE(eventually([&] { return watch_->synced(); }));
    }
    // Waits until addresses() equals `want`.
    bool addresses_become(const std::map<std::string, std::vector<IpAddr>>& want) {
        return eventually([&] { return watch_->addresses() == want; });
    }

    LogCapture log_;
    std::unique_ptr<ApiServerProcess> server_;
    std::shared_ptr<egw::k8s::Transport> transport_;
    std::unique_ptr<DnsNameResolverWatch> watch_;
};

TEST_F(DnsNameResolverWatchTest, FollowsObjectsAndTheirStatus) {
    server_->control("upsert", resolver("wild", "*.example.com.",
                                        json::array({resolved("www.example.com.", {"192.0.2.2", "2001:db8::2"}),
                                                     resolved("api.example.com.", {"192.0.2.1"})})));
    server_->control("upsert", resolver("exact", "db.example.org."));
    start();
    EXPECT_EQ(watch_->addresses(),
              (std::map<std::string, std::vector<IpAddr>>{
                  {"*.example.com", {ip("192.0.2.1"), ip("192.0.2.2"), ip("2001:db8::2")}}, {"db.example.org", {}}}));
    EXPECT_EQ(watch_->objects(), 2u);
    const uint64_t listed = watch_->generation();

    // CoreDNS's plugin writes the exact name's status: a watch event.
    server_->control(
        "upsert", resolver("exact", "db.example.org.", json::array({resolved("db.example.org.", {"198.51.100.7"})})));
    ASSERT_TRUE(addresses_become({{"*.example.com", {ip("192.0.2.1"), ip("192.0.2.2"), ip("2001:db8::2")}},
                                  {"db.example.org", {ip("198.51.100.7")}}}));
    EXPECT_GT(watch_->generation(), listed);

    server_->control("delete", {{"kind", "DNSNameResolver"}, {"namespace", kNamespace}, {"name", "wild"}});
    ASSERT_TRUE(addresses_become({{"db.example.org", {ip("198.51.100.7")}}}));
    EXPECT_EQ(watch_->objects(), 1u);
}

TEST_F(DnsNameResolverWatchTest, ARefusedObjectIsLoggedOnceAndLeftOut) {
    server_->control("upsert",
                     resolver("good", "*.example.com.", json::array({resolved("a.example.com.", {"192.0.2.1"})})));
    start();
    // The test server's upsert stores what it is given, so the parser is what refuses this one.
    json bad = resolver("bad", "*.example.net.", json::array({resolved("a.example.net.", {"192.0.2.300"})}));
    server_->control("upsert", bad);
    ASSERT_TRUE(eventually([&] { return watch_->rejected() == 1; }));
    EXPECT_EQ(watch_->addresses(), (std::map<std::string, std::vector<IpAddr>>{{"*.example.com", {ip("192.0.2.1")}}}));
    EXPECT_EQ(log_.sink().count(spdlog::level::warn,
                                "DNSNameResolver openshift-ovn-kubernetes/bad: ignored: "
                                "$.status.resolvedNames[0].resolvedAddresses[0].ip"),
              1u);
    // A relist (410 after compaction) meets it unchanged: not logged again.
    server_->control("compact", {{"expireWatches", true}});
    server_->control("upsert",
                     resolver("good", "*.example.com.", json::array({resolved("a.example.com.", {"192.0.2.5"})})));
    ASSERT_TRUE(addresses_become({{"*.example.com", {ip("192.0.2.5")}}}));
    ASSERT_TRUE(eventually([&] { return watch_->status().lists >= 2; }));
    EXPECT_EQ(watch_->rejected(), 1u);
    EXPECT_EQ(log_.sink().count(spdlog::level::warn, "openshift-ovn-kubernetes/bad: ignored"), 1u);
    // Fixed, it counts.
    bad["status"]["resolvedNames"][0]["resolvedAddresses"][0]["ip"] = "192.0.2.30";
    server_->control("upsert", bad);
    ASSERT_TRUE(addresses_become({{"*.example.com", {ip("192.0.2.5")}}, {"*.example.net", {ip("192.0.2.30")}}}));
    EXPECT_EQ(watch_->rejected(), 0u);
}

}  // namespace
