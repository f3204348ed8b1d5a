// SPDX-License-Identifier: Apache-2.0
//
// DNSNameResolver objects (control/dns/dns_name_resolver.h): the strict parser, wildcard
// matching of one label, and the addresses a wildcard dnsName stands for.
#include "control/dns/dns_name_resolver.h"

#include <gtest/gtest.h>

namespace {

using namespace egw::dns;
using egw::net::IpAddr;
using json = nlohmann::json;

IpAddr ip(const char* s) {
    return *egw::net::parse_ip(s);
}

json object(const std::string& spec_name, json resolved_names) {
    json j = {{"apiVersion", "network.openshift.io/v1alpha1"},
              {"kind", "DNSNameResolver"},
              {"metadata", {{"name", "dns-1"}, {"namespace", "openshift-ovn-kubernetes"}}},
              {"spec", {{"name", spec_name}}}};
    if (!resolved_names.is_null()) j["status"] = {{"resolvedNames", resolved_names}};
    return j;
}

json address(const char* a, int64_t ttl, const char* when = "2024-05-01T10:00:00Z") {
    return {{"ip", a}, {"ttlSeconds", ttl}, {"lastLookupTime", when}};
}

std::string error_of(const json& j) {
    try {
        parse_dns_name_resolver(j);
    } catch (const DnsNameResolverError& e) {
        return e.what();
    }
    return "";
}

TEST(DnsNameResolver, ParsesSpecAndStatus) {
    const json j = object("*.Example.COM.",
                          json::array({
                              {{"dnsName", "www.example.com."},
                               {"resolvedAddresses",
                                {address("192.0.2.1", 30), address("2001:db8::1", 45, "2024-05-01T10:00:01.5+02:00")}},
                               {"resolutionFailures", 0}},
                              {{"dnsName", "*.example.com."}},
                          }));
    const DnsNameResolver r = parse_dns_name_resolver(j);
    EXPECT_EQ(r.name, "dns-1");
    EXPECT_EQ(r.namespace_, "openshift-ovn-kubernetes");
    EXPECT_EQ(r.dns_name, "*.example.com");
    ASSERT_EQ(r.resolved.size(), 2u);
    EXPECT_EQ(r.resolved[0].dns_name, "www.example.com");
    ASSERT_EQ(r.resolved[0].addresses.size(), 2u);
    EXPECT_EQ(r.resolved[0].addresses[0].ip, ip("192.0.2.1"));
    EXPECT_EQ(r.resolved[0].addresses[0].ttl_seconds, 30u);
    using std::chrono::system_clock;
    EXPECT_EQ(system_clock::to_time_t(r.resolved[0].addresses[0].last_lookup), 1714557600);
    // 10:00:01.5 at +02:00 is 08:00:01.5 UTC.
    EXPECT_EQ(r.resolved[0].addresses[1].last_lookup,
              system_clock::from_time_t(1714557600 - 7200 + 1) + std::chrono::milliseconds(500));
    EXPECT_TRUE(r.resolved[1].addresses.empty());
}

// metav1.Time takes years 0000-9999; nanoseconds since 1970 in 64 bits reach only 1678-2262 (the
// fuzzer found year 0224 overflowing them).
TEST(DnsNameResolver, LookupTimesOfAnyFourDigitYear) {
    const json j = object("*.example.com.", json::array({
                                                {{"dnsName", "a.example.com."},
                                                 {"resolvedAddresses",
                                                  {address("192.0.2.1", 30, "0224-05-01T10:00:00Z"),
                                                   address("192.0.2.2", 30, "9999-12-31T23:59:59.999999Z")}}},
                                            }));
    const DnsNameResolver r = parse_dns_name_resolver(j);
    auto micros = [](auto t) {
        return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    };
    EXPECT_EQ(micros(r.resolved[0].addresses[0].last_lookup), -55087999200LL * 1000000);
    EXPECT_EQ(micros(r.resolved[0].addresses[1].last_lookup), 253402300799LL * 1000000 + 999999);
}

TEST(DnsNameResolver, WithoutStatusNothingIsResolved) {
    const DnsNameResolver r = parse_dns_name_resolver(object("www.example.com.", nullptr));
    EXPECT_EQ(r.dns_name, "www.example.com");
    EXPECT_TRUE(r.resolved.empty());
}

TEST(DnsNameResolver, NamesTheOffendingField) {
    json j = object("*.example.com.", nullptr);
    j["apiVersion"] = "network.openshift.io/v1";
    EXPECT_EQ(error_of(j), "$.apiVersion: expected \"network.openshift.io/v1alpha1\", got \"network.openshift.io/v1\"");
    j = object("ex ample.com", nullptr);
    EXPECT_EQ(error_of(j),
              "$.spec.name: expected a DNS name like \"*.example.com.\" or \"www.example.com.\", got "
              "\"ex ample.com\"");
    j = object("*.example.com.",
               json::array({{{"dnsName", "a.example.com."}, {"resolvedAddresses", {address("192.0.2.300", 30)}}}}));
    EXPECT_EQ(error_of(j),
              "$.status.resolvedNames[0].resolvedAddresses[0].ip: expected an IPv4 or IPv6 address, got "
              "\"192.0.2.300\"");
    j = object("*.example.com.",
               json::array({{{"dnsName", "a.example.com."}, {"resolvedAddresses", {address("192.0.2.3", -1)}}}}));
    EXPECT_EQ(error_of(j),
              "$.status.resolvedNames[0].resolvedAddresses[0].ttlSeconds: expected an integer from 0 to "
              "2147483647, got -1");
    j = object(
        "*.example.com.",
        json::array({{{"dnsName", "a.example.com."}, {"resolvedAddresses", {address("192.0.2.3", 5, "yesterday")}}}}));
    EXPECT_EQ(error_of(j),
              "$.status.resolvedNames[0].resolvedAddresses[0].lastLookupTime: expected an RFC 3339 time "
              "like \"2024-05-01T10:00:00Z\", got \"yesterday\"");
    j = object("*.example.com.", json::array({{{"resolvedAddresses", json::array()}}}));
    EXPECT_EQ(error_of(j), "$.status.resolvedNames[0].dnsName: required field is missing");
    j = object("*.example.com.", json::object());
    EXPECT_EQ(error_of(j), "$.status.resolvedNames: expected an array, got an object");
    // A long value is cut for the message, never inside a UTF-8 character (the fuzzer's find).
    j = object("*.example.com.", nullptr);
    j["apiVersion"] = std::string(60, 'a') + "\u00e9\u00e9\u00e9";
    EXPECT_EQ(error_of(j),
              "$.apiVersion: expected \"network.openshift.io/v1alpha1\", got \"" + std::string(60, 'a') + "...\"");
    j = object("*.example.com.", nullptr);
    j.erase("spec");
    EXPECT_EQ(error_of(j), "$.spec: required field is missing");
}

TEST(DnsNameResolver, WildcardMatchesExactlyOneLabel) {
    EXPECT_TRUE(dns_name_matches("*.example.com", "www.example.com"));
    EXPECT_TRUE(dns_name_matches("*.example.com", "*.example.com"));
    EXPECT_FALSE(dns_name_matches("*.example.com", "a.b.example.com"));
    EXPECT_FALSE(dns_name_matches("*.example.com", "example.com"));
    EXPECT_FALSE(dns_name_matches("*.example.com", "wwwexample.com"));
    EXPECT_FALSE(dns_name_matches("*.example.com", ".example.com"));
    EXPECT_TRUE(dns_name_matches("www.example.com", "www.example.com"));
    EXPECT_FALSE(dns_name_matches("www.example.com", "a.www.example.com"));
}

TEST(DnsNameResolver, AddressesOfAWildcardAreEveryMatchingNamesMerged) {
    std::vector<DnsNameResolver> objects;
    objects.push_back(parse_dns_name_resolver(object(
        "*.example.com.", json::array({
                              {{"dnsName", "www.example.com."},
                               {"resolvedAddresses", {address("192.0.2.2", 30), address("2001:db8::1", 30)}}},
                              {{"dnsName", "api.example.com."},
                               {"resolvedAddresses", {address("192.0.2.1", 30), address("192.0.2.2", 5)}}},
                              // Not one label below example.com: not the wildcard's, whatever the plugin wrote.
                              {{"dnsName", "a.b.example.com."}, {"resolvedAddresses", {address("198.51.100.1", 30)}}},
                          }))));
    // Another namespace's object for the same name adds its own.
    json other =
        object("*.EXAMPLE.com",
               json::array({{{"dnsName", "mail.example.com."}, {"resolvedAddresses", {address("192.0.2.9", 30)}}}}));
    objects.push_back(parse_dns_name_resolver(other));
    objects.push_back(parse_dns_name_resolver(object("nothing.example.org.", nullptr)));
    const auto m = dns_name_resolver_addresses(objects);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m.at("*.example.com"),
              (std::vector<IpAddr>{ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.9"), ip("2001:db8::1")}));
    EXPECT_TRUE(m.at("nothing.example.org").empty());
}

TEST(DnsNameResolver, SnapshotAddressesHaveTheSameShape) {
    Snapshot s;
    s["web.example"].addresses = {{ip("192.0.2.1"), Clock::time_point{}}, {ip("2001:db8::5"), Clock::time_point{}}};
    s["none.example"];
    const auto m = snapshot_addresses(s);
    EXPECT_EQ(m.at("web.example"), (std::vector<IpAddr>{ip("192.0.2.1"), ip("2001:db8::5")}));
    EXPECT_TRUE(m.at("none.example").empty());
}

}  // namespace
