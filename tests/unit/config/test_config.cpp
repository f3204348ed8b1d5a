// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the strict configuration loader (config/loader.cpp): helpers, the happy path,
// and one case per kind of error with the exact message; and of its inverse, config::to_json
// (config/dump.cpp), by round trips through the loader.
#include "config/config.h"
#include "config/dump.h"
#include "config/reload.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>

namespace {

using namespace egw::config;
namespace net = egw::net;
using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kFile = "test.json";

IpAddr ip(const char* s) {
    auto v = net::parse_ip(s);
    EXPECT_TRUE(v.has_value()) << s;
    return v.value_or(IpAddr{});
}

IpPrefix prefix(const char* s) {
    auto v = net::parse_prefix(s);
    EXPECT_TRUE(v.has_value()) << s;
    return v.value_or(IpPrefix{});
}

MacAddr mac(const char* s) {
    auto v = parse_mac(s);
    EXPECT_TRUE(v.has_value()) << s;
    return v.value_or(MacAddr{});
}

// The smallest interesting valid file: two VRFs, an inside port and an outside port in each.
json base() {
    return json::parse(R"({
      "eal": {"vdevs": ["net_tap0,iface=egw0", "net_tap1", "net_tap2"]},
      "workers": [1],
      "ports": [
        {"name": "in", "device": "net_tap0", "role": "inside", "addresses": ["10.244.1.1/24"]},
        {"name": "out", "device": "net_tap1", "role": "outside", "addresses": ["192.0.2.1/24"]},
        {"name": "blue1", "device": "net_tap2", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/24"]}
      ],
      "vrfs": [{"name": "blue", "table": 100}],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
      "node": {"name": "gw-1"},
      "state": {"source": "files", "path": "manifests"}
    })");
}

// A valid "sync" section: this gateway 1, peers 2 and 3.
json sync_section() {
    return json::parse(R"({"id": 1, "listen": "10.0.0.1:7470", "key_file": "sync.key",
                           "peers": [{"id": 2, "address": "10.0.0.2:7470"}, {"id": 3, "address": "[fd00::3]:7470"}]})");
}

// A VLAN port of `parent` with a /24 of its own in the default VRF.
json vlan_port(const std::string& name, const std::string& parent, unsigned vid) {
    return {{"name", name},
            {"parent", parent},
            {"vlan", vid},
            {"role", "outside"},
            {"addresses", {"100.64." + std::to_string(vid % 256) + ".1/24"}}};
}

// Loads `text` and returns what() of the ConfigError, checking that file() and path() agree with
// the message's prefix.
std::string error_of(const std::string& text, const std::string& file = kFile) {
    try {
        load_text(text, file);
    } catch (const ConfigError& e) {
        std::string what = e.what();
        EXPECT_EQ(e.file(), file);
        EXPECT_EQ(what.rfind(e.file() + ": " + e.path() + ": ", 0), 0u) << what;
        return what;
    } catch (const std::exception& e) {
        return std::string("unexpected exception: ") + e.what();
    }
    return "no error";
}

std::string error_of_json(const json& j) {
    return error_of(j.dump(2));
}

std::string msg(const std::string& path, const std::string& expected) {
    return std::string(kFile) + ": " + path + ": " + expected;
}

// A fresh directory under the system's temp directory, removed at the end of the test.
class TempDir {
public:
    TempDir() {
        std::random_device rd;
        for (int attempt = 0; attempt < 100; ++attempt) {
            fs::path p = fs::temp_directory_path() / ("egw-config-test-" + std::to_string(rd()));
            if (fs::create_directory(p)) {
                path_ = p;
                return;
            }
        }
        throw std::runtime_error("cannot create a temp directory");
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    const fs::path& path() const { return path_; }
    fs::path write(const std::string& name, const std::string& text) const {
        fs::path p = path_ / name;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
        return p;
    }

private:
    fs::path path_;
};

// The source tree: $EGW_SOURCE_ROOT (set by `meson test`), else the tree this binary was built
// from (so that running the test binary by hand works too).
std::string source_root() {
    if (const char* root = std::getenv("EGW_SOURCE_ROOT")) return root;
#ifdef EGW_BUILD_SOURCE_ROOT
    return EGW_BUILD_SOURCE_ROOT;
#else
    return ".";
#endif
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

TEST(ParseIpv4, AcceptsDottedQuads) {
    EXPECT_EQ(parse_ipv4("0.0.0.0"), 0u);
    EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xffffffffu);
    EXPECT_EQ(parse_ipv4("10.0.0.1"), 0x0a000001u);
    EXPECT_EQ(parse_ipv4("192.0.2.254"), 0xc00002feu);
}

TEST(ParseIpv4, RejectsEverythingElse) {
    for (const char* s : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "01.2.3.4", "1.2.3.00", "+1.2.3.4",
                          "1..3.4", "1.2.3.", ".1.2.3", "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4", "a.b.c.d", "1.2.3.4/24",
                          "0x1.2.3.4", "1000.1.1.1", "1.2.3.4\n"})
        EXPECT_FALSE(parse_ipv4(s).has_value()) << '"' << s << '"';
}

TEST(ParseIpv4Prefix, KeepsHostBits) {
    auto p = net::parse_prefix("10.0.0.1/24");
    ASSERT_TRUE(p);
    EXPECT_TRUE(p->is_v4());
    EXPECT_EQ(p->addr.v4(), 0x0a000001u);
    EXPECT_EQ(p->len, 24);
    EXPECT_EQ(p->network4(), 0x0a000000u);
    EXPECT_EQ(p->network(), ip("10.0.0.0"));
    EXPECT_EQ(p->mask4(), 0xffffff00u);
    EXPECT_TRUE(p->contains(ip("10.0.0.200")));
    EXPECT_FALSE(p->contains(ip("10.0.1.1")));
    auto all = net::parse_prefix("0.0.0.0/0");
    ASSERT_TRUE(all);
    EXPECT_EQ(all->mask4(), 0u);
    EXPECT_TRUE(all->contains(ip("203.0.113.9")));
    EXPECT_FALSE(all->contains(ip("::"))) << "a prefix holds addresses of its own family only";
    auto host = net::parse_prefix("192.0.2.7/32");
    ASSERT_TRUE(host);
    EXPECT_EQ(host->mask4(), 0xffffffffu);
}

TEST(ParseIpv4Prefix, RejectsEverythingElse) {
    for (const char* s : {"", "10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/024", "10.0.0.0/+4", "10.0.0.0/24/1",
                          "10.0.0.0/2a", "10.0.0/8", "/8", "10.0.0.0 /8", "10.0.0.0/-1", "10.0.0.0/100"})
        EXPECT_FALSE(net::parse_prefix(s).has_value()) << '"' << s << '"';
}

TEST(ParseIpv6, AcceptsEveryFormAndPrintsCanonically) {
    // RFC 5952: lower case, longest zero run compressed (the first of equal ones), no single
    // zero group compressed, leading zeros dropped.
    const std::pair<const char*, const char*> cases[] = {
        {"2001:db8::1", "2001:db8::1"},
        {"2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
        {"2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"},
        {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
        {"2001:db8:1:1:1:1:0:1", "2001:db8:1:1:1:1:0:1"},
        {"::", "::"},
        {"fe80::a:b", "fe80::a:b"},
        {"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
        {"64:ff9b::192.0.2.33", "64:ff9b::c000:221"},
    };
    for (const auto& [in, out] : cases) {
        auto a = net::parse_ip(in);
        ASSERT_TRUE(a) << in;
        EXPECT_TRUE(a->is_v6()) << in;
        EXPECT_EQ(net::to_string(*a), out) << in;
        EXPECT_EQ(net::parse_ip(net::to_string(*a)), a) << in;
    }
    auto a = net::parse_ip("2001:db8::102:304");
    ASSERT_TRUE(a);
    const uint8_t want[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    EXPECT_TRUE(std::equal(std::begin(want), std::end(want), a->bytes().begin()));
}

TEST(ParseIpv6, RejectsEverythingElse) {
    for (const char* s :
         {":", ":::", "2001:db8::1::2", "2001:db8:1:2:3:4:5:6:7", "2001:db8::g", "2001:db8::12345", "[2001:db8::1]",
          "fe80::1%eth0", "2001:db8::1/64", " ::1", "::1 ", "::ffff:1.2.3", "::ffff:01.2.3.4", "1:2:3:4:5:6:7"})
        EXPECT_FALSE(net::parse_ip(s).has_value()) << '"' << s << '"';
}

TEST(ParseIpv6Prefix, NetworkAndContains) {
    auto p = net::parse_prefix("2001:db8:aa:bbcc::1/57");
    ASSERT_TRUE(p);
    EXPECT_TRUE(p->is_v6());
    EXPECT_EQ(p->len, 57);
    EXPECT_EQ(net::to_string(p->network()), "2001:db8:aa:bb80::");
    EXPECT_TRUE(p->contains(ip("2001:db8:aa:bbff::9")));
    EXPECT_TRUE(p->contains(ip("2001:db8:aa:bb80::")));
    EXPECT_FALSE(p->contains(ip("2001:db8:aa:bb7f::1")));
    EXPECT_FALSE(p->contains(ip("10.0.0.1")));
    auto all = net::parse_prefix("::/0");
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->contains(ip("2001:db8::1")));
    EXPECT_FALSE(all->contains(ip("0.0.0.0")));
    auto host = net::parse_prefix("2001:db8::7/128");
    ASSERT_TRUE(host);
    EXPECT_EQ(host->network(), ip("2001:db8::7"));
    EXPECT_FALSE(host->contains(ip("2001:db8::6")));
    for (const char* s : {"2001:db8::/129", "2001:db8::/0128", "2001:db8::", "2001:db8::/", "/64", "2001:db8::/6a"})
        EXPECT_FALSE(net::parse_prefix(s).has_value()) << '"' << s << '"';
}

TEST(IpAddr, OrdersIpv4FirstAndClassifies) {
    EXPECT_LT(ip("255.255.255.255"), ip("::"));
    EXPECT_LT(ip("10.0.0.1"), ip("10.0.0.2"));
    EXPECT_LT(ip("2001:db8::1"), ip("2001:db8::1:0"));
    EXPECT_NE(ip("0.0.0.0"), ip("::"));
    EXPECT_EQ(net::IpAddrHash{}(ip("2001:db8::1")), net::IpAddrHash{}(ip("2001:0db8::0001")));
    EXPECT_NE(net::IpAddrHash{}(ip("0.0.0.0")), net::IpAddrHash{}(ip("::")));
    EXPECT_TRUE(ip("::").is_unspecified());
    EXPECT_TRUE(ip("::1").is_loopback());
    EXPECT_TRUE(ip("ff02::1").is_multicast());
    EXPECT_TRUE(ip("fe80::1").is_link_local());
    EXPECT_TRUE(ip("febf::1").is_link_local());
    EXPECT_FALSE(ip("fec0::1").is_link_local());
    EXPECT_TRUE(ip("::ffff:10.0.0.1").is_v4_mapped());
    EXPECT_FALSE(ip("::10.0.0.1").is_v4_mapped());
    EXPECT_TRUE(ip("169.254.1.1").is_link_local());
    EXPECT_TRUE(ip("224.0.0.1").is_multicast());
    EXPECT_EQ(ip("192.0.2.1").v4(), 0xc0000201u);
    EXPECT_EQ(net::IpAddr::from_v4(0xc0000201u), ip("192.0.2.1"));
}

TEST(ParseMac, AcceptsColonHex) {
    auto m = parse_mac("02:e9:0A:bC:00:ff");
    ASSERT_TRUE(m);
    const uint8_t want[6] = {0x02, 0xe9, 0x0a, 0xbc, 0x00, 0xff};
    EXPECT_TRUE(std::equal(std::begin(want), std::end(want), m->bytes));
}

TEST(ParseMac, RejectsEverythingElse) {
    for (const char* s :
         {"", "02:00:00:00:00", "02-00-00-00-00-01", "0g:00:00:00:00:01", "2:0:0:0:0:1", "02:00:00:00:00:011",
          "02:00:00:00:00:0", "0200.0000.0001", "02:00:00:00:00:01:", " 02:00:00:00:00:01"})
        EXPECT_FALSE(parse_mac(s).has_value()) << '"' << s << '"';
}

TEST(Format, RoundTrips) {
    EXPECT_EQ(format_ipv4(0xc0000201u), "192.0.2.1");
    EXPECT_EQ(format_ipv4(0), "0.0.0.0");
    EXPECT_EQ(net::to_string(IpPrefix{net::IpAddr::from_v4(0x0a000001u), 24}), "10.0.0.1/24");
    EXPECT_EQ(net::to_string(prefix("0.0.0.0/0")), "0.0.0.0/0");
    EXPECT_EQ(net::to_string(prefix("2001:db8::1/64")), "2001:db8::1/64");
    EXPECT_EQ(format_mac(mac("02:E9:00:0a:00:01")), "02:e9:00:0a:00:01");
    for (const char* s : {"1.2.3.4", "255.0.255.0", "10.244.1.1"})
        EXPECT_EQ(format_ipv4(ip(s).v4()), s);
}

TEST(ToString, Enums) {
    EXPECT_STREQ(to_string(PortRole::inside), "inside");
    EXPECT_STREQ(to_string(PortRole::outside), "outside");
    EXPECT_STREQ(to_string(DefaultAction::route), "route");
    EXPECT_STREQ(to_string(DefaultAction::masquerade), "masquerade");
    EXPECT_STREQ(to_string(DefaultAction::drop), "drop");
    EXPECT_STREQ(to_string(StateSource::files), "files");
    EXPECT_STREQ(to_string(StateSource::kubernetes), "kubernetes");
}

TEST(ConfigError, FormatsFilePathAndExpectation) {
    ConfigError e("a.json", "$.x", "expected y, got z");
    EXPECT_STREQ(e.what(), "a.json: $.x: expected y, got z");
    EXPECT_EQ(e.file(), "a.json");
    EXPECT_EQ(e.path(), "$.x");
}

TEST(Find, PortsAndVrfsByNameOrTable) {
    Config c = load_text(base().dump(), kFile);
    ASSERT_NE(c.find_port("out"), nullptr);
    EXPECT_EQ(c.find_port("out")->device, "net_tap1");
    EXPECT_EQ(c.find_port("nope"), nullptr);
    ASSERT_NE(c.find_vrf("blue"), nullptr);
    EXPECT_EQ(c.find_vrf("blue")->table, 100u);
    ASSERT_NE(c.find_vrf("100"), nullptr);
    EXPECT_EQ(c.find_vrf("100")->name, "blue");
    ASSERT_NE(c.find_vrf("254"), nullptr);
    EXPECT_EQ(c.find_vrf("254")->name, "default");
    EXPECT_EQ(c.find_vrf("default")->table, 254u);
    EXPECT_EQ(c.find_vrf("0100"), nullptr);
    EXPECT_EQ(c.find_vrf("+100"), nullptr);
    EXPECT_EQ(c.find_vrf("101"), nullptr);
    EXPECT_EQ(c.find_vrf(""), nullptr);
    EXPECT_EQ(c.find_vrf("99999999999"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Happy paths
// ---------------------------------------------------------------------------------------------

TEST(Load, MinimalFileGetsDefaults) {
    Config c = load_text(R"({
      "eal": {"vdevs": ["net_tap0", "net_tap1"]},
      "workers": [1],
      "ports": [{"name": "a", "device": "net_tap0", "role": "inside"},
                {"name": "b", "device": "net_tap1", "role": "outside"}],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
      "node": {"name": "gw-1"},
      "state": {"path": "m"}
    })",
                         "/etc/egw/egw.json");
    EXPECT_EQ(c.file, "/etc/egw/egw.json");
    EXPECT_EQ(c.eal.lcores, "0-1");
    EXPECT_EQ(c.eal.main_lcore, 0u);
    EXPECT_TRUE(c.eal.no_huge);
    EXPECT_EQ(c.eal.memory_mb, 512u);
    EXPECT_EQ(c.eal.file_prefix, "egw");
    EXPECT_TRUE(c.eal.pci_allow.empty());
    EXPECT_TRUE(c.eal.extra_args.empty());
    EXPECT_EQ(c.mempool.mbufs, 16383u);
    EXPECT_EQ(c.mempool.cache, 256u);
    EXPECT_EQ(c.mempool.data_room, 2176u);
    ASSERT_EQ(c.ports.size(), 2u);
    EXPECT_EQ(c.ports[0].vrf, "default");
    EXPECT_TRUE(c.ports[0].addresses.empty());
    EXPECT_FALSE(c.ports[0].mac.has_value());
    EXPECT_EQ(c.ports[0].mtu, 1500u);
    EXPECT_EQ(c.ports[0].rx_desc, 1024u);
    EXPECT_EQ(c.ports[0].tx_desc, 1024u);
    ASSERT_EQ(c.vrfs.size(), 1u);
    EXPECT_EQ(c.vrfs[0].name, "default");
    EXPECT_EQ(c.vrfs[0].table, 254u);
    EXPECT_TRUE(c.routes.empty());
    EXPECT_TRUE(c.neighbors.empty());
    EXPECT_TRUE(c.cluster.service_cidrs.empty());
    EXPECT_TRUE(c.cluster.node_ips.empty());
    EXPECT_EQ(c.default_action, DefaultAction::masquerade);
    EXPECT_TRUE(c.policy.enforce_egress_firewall(c.state.source)) << "enforced by default with the files source";
    EXPECT_FALSE(c.policy.egress_firewall_icmp);
    EXPECT_EQ(c.sessions.max_sessions, 1u << 20);
    EXPECT_EQ(c.sessions.max_sessions_ipv6, 1u << 20);
    EXPECT_EQ(c.sessions.port_min, 1024);
    EXPECT_EQ(c.sessions.port_max, 65535);
    EXPECT_EQ(c.sessions.timeouts.tcp_established_s, 7440u);
    EXPECT_EQ(c.sessions.timeouts.tcp_transitory_s, 240u);
    EXPECT_EQ(c.sessions.timeouts.udp_s, 300u);
    EXPECT_EQ(c.sessions.timeouts.icmp_s, 60u);
    EXPECT_EQ(c.sessions.tcp_open, TcpOpen::loose);
    EXPECT_EQ(c.sessions.max_per_pod, 0u);
    EXPECT_EQ(c.sessions.timeouts.tcp_half_closed_s, 600u);
    EXPECT_EQ(c.arp.max_neighbors, 4096u);
    EXPECT_EQ(c.arp.hold_packets, 256u);
    EXPECT_EQ(c.arp.retry_ms, 1000u);
    EXPECT_EQ(c.arp.reachable_s, 30u);
    EXPECT_EQ(c.arp.probes, 3u);
    EXPECT_EQ(c.arp.unused_s, 60u);
    EXPECT_EQ(c.icmp.errors_per_second, 1000u);
    EXPECT_EQ(c.icmp.burst, 50u);
    EXPECT_EQ(c.reassembly.max_datagrams, 256u);
    EXPECT_EQ(c.reassembly.max_fragments, 8u);
    EXPECT_EQ(c.reassembly.timeout_ms, 2000u);
    EXPECT_EQ(c.reassembly.per_source(), 64u) << "a quarter of the table";
    EXPECT_FALSE(c.ingress.via) << "no ingress next hop unless configured";
    EXPECT_FALSE(c.ingress.via6);
    EXPECT_EQ(c.arp.announce_count, 3u);
    EXPECT_EQ(c.arp.announce_interval_ms, 1000u);
    EXPECT_TRUE(c.node.labels.empty());
    EXPECT_EQ(c.state.source, StateSource::files);
    EXPECT_EQ(c.state.path, "/etc/egw/m");
    EXPECT_EQ(c.state.poll_ms, 200u);
    EXPECT_EQ(c.state.kubeconfig, "");
}

TEST(Load, FullFileEveryFieldLands) {
    Config c = load_text(R"({
      "eal": {"lcores": "0-3", "main_lcore": 3, "no_huge": false, "memory_mb": 2048, "file_prefix": "egw-x",
              "vdevs": ["net_tap0,iface=egw0", "net_null0"], "pci_allow": ["0000:01:00.0", "02:00.1,rx_vec_en=0"],
              "extra_args": ["--log-level=lib.eal:debug", "--in-memory"]},
      "workers": [2, 0, 1],
      "mempool": {"mbufs": 32767, "cache": 512, "data_room": 9344},
      "ports": [
        {"name": "pods", "device": "net_tap0", "role": "inside", "vrf": "default",
         "addresses": ["10.244.1.1/24", "10.244.9.1/32"], "mac": "02:00:00:00:00:01", "mtu": 9000,
         "rx_desc": 2048, "tx_desc": 512, "queues": 2},
        {"name": "up", "device": "0000:01:00.0", "role": "outside", "addresses": ["192.0.2.1/24"]},
        {"name": "blue", "device": "0000:02:00.1", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/25"]},
        {"name": "sink", "device": "net_null0", "role": "outside", "vrf": "red"}
      ],
      "neighbors": [{"port": "up", "ip": "192.0.2.254", "mac": "02:00:00:00:00:fe"},
                    {"port": "blue", "ip": "198.51.100.126", "mac": "02:00:00:00:01:FE"}],
      "vrfs": [{"name": "blue", "table": 100}, {"name": "default", "table": 254}, {"name": "red", "table": 4294967294}],
      "routes": [
        {"prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "up"},
        {"vrf": "blue", "prefix": "0.0.0.0/0", "via": "198.51.100.126", "port": "blue"},
        {"vrf": "red", "prefix": "203.0.113.0/24", "port": "sink"},
        {"vrf": "default", "prefix": "203.0.113.0/24", "port": "up"}
      ],
      "cluster": {"pod_cidrs": ["10.244.0.0/16", "10.245.0.0/16"], "service_cidrs": ["10.96.0.0/12"],
                  "node_ips": ["172.18.0.2", "172.18.0.3"]},
      "default_action": "drop",
      "sessions": {"max": 1000, "port_min": 2000, "port_max": 3000,
                   "timeouts": {"tcp_established": 1, "tcp_transitory": 2, "udp": 3, "icmp": 4}},
      "icmp": {"errors_per_second": 0, "burst": 7},
      "reassembly": {"max_datagrams": 64, "max_fragments": 4, "timeout_ms": 500},
      "ingress": {"via": "10.244.1.254", "port": "pods"},
      "arp": {"max_neighbors": 10, "hold_packets": 0, "retry_ms": 100, "reachable_s": 20, "probes": 5,
              "unused_s": 90, "announce_count": 0, "announce_interval_ms": 250},
      "node": {"name": "gw-1.example.com", "labels": {"egw.example.com/gateway": "true", "zone": ""}},
      "state": {"source": "kubernetes", "kubeconfig": "/etc/kubernetes/admin.conf"}
    })",
                         "cfg/egw.json");

    EXPECT_EQ(c.file, "cfg/egw.json");
    EXPECT_EQ(c.eal.lcores, "0-3");
    EXPECT_EQ(c.eal.main_lcore, 3u);
    EXPECT_FALSE(c.eal.no_huge);
    EXPECT_EQ(c.eal.memory_mb, 2048u);
    EXPECT_EQ(c.eal.file_prefix, "egw-x");
    EXPECT_EQ(c.eal.vdevs, (std::vector<std::string>{"net_tap0,iface=egw0", "net_null0"}));
    EXPECT_EQ(c.eal.pci_allow, (std::vector<std::string>{"0000:01:00.0", "02:00.1,rx_vec_en=0"}));
    EXPECT_EQ(c.eal.extra_args, (std::vector<std::string>{"--log-level=lib.eal:debug", "--in-memory"}));
    EXPECT_EQ(c.workers, (std::vector<unsigned>{2, 0, 1}));
    EXPECT_EQ(c.mempool.mbufs, 32767u);
    EXPECT_EQ(c.mempool.cache, 512u);
    EXPECT_EQ(c.mempool.data_room, 9344u);

    ASSERT_EQ(c.ports.size(), 4u);
    const PortConfig& pods = c.ports[0];
    EXPECT_EQ(pods.name, "pods");
    EXPECT_EQ(pods.device, "net_tap0");
    EXPECT_EQ(pods.role, PortRole::inside);
    EXPECT_EQ(pods.vrf, "default");
    ASSERT_EQ(pods.addresses.size(), 2u);
    EXPECT_EQ(pods.addresses[0], (IpPrefix{ip("10.244.1.1"), 24}));
    EXPECT_EQ(pods.addresses[1], (IpPrefix{ip("10.244.9.1"), 32}));
    ASSERT_TRUE(pods.mac.has_value());
    EXPECT_EQ(*pods.mac, mac("02:00:00:00:00:01"));
    EXPECT_EQ(pods.mtu, 9000u);
    EXPECT_EQ(pods.rx_desc, 2048u);
    EXPECT_EQ(pods.tx_desc, 512u);
    EXPECT_EQ(pods.queues, 2u);
    EXPECT_EQ(c.ports[1].queues, 0u) << "absent: one per worker";
    EXPECT_EQ(c.ports[1].device, "0000:01:00.0");
    EXPECT_EQ(c.ports[1].role, PortRole::outside);
    EXPECT_EQ(c.ports[1].vrf, "default");
    EXPECT_FALSE(c.ports[1].mac.has_value());
    EXPECT_EQ(c.ports[2].vrf, "blue");
    EXPECT_EQ(c.ports[2].addresses[0], (IpPrefix{ip("198.51.100.1"), 25}));
    EXPECT_EQ(c.ports[3].vrf, "red");
    EXPECT_TRUE(c.ports[3].addresses.empty());

    ASSERT_EQ(c.neighbors.size(), 2u);
    EXPECT_EQ(c.neighbors[0].port, "up");
    EXPECT_EQ(c.neighbors[0].ip, ip("192.0.2.254"));
    EXPECT_EQ(c.neighbors[0].mac, mac("02:00:00:00:00:fe"));
    EXPECT_EQ(c.neighbors[1].port, "blue");
    EXPECT_EQ(c.neighbors[1].mac, mac("02:00:00:00:01:fe"));

    ASSERT_EQ(c.vrfs.size(), 3u);
    EXPECT_EQ(c.vrfs[0].name, "default");
    EXPECT_EQ(c.vrfs[0].table, 254u);
    EXPECT_EQ(c.vrfs[1].name, "blue");
    EXPECT_EQ(c.vrfs[1].table, 100u);
    EXPECT_EQ(c.vrfs[2].name, "red");
    EXPECT_EQ(c.vrfs[2].table, 4294967294u);

    ASSERT_EQ(c.routes.size(), 4u);
    EXPECT_EQ(c.routes[0].vrf, "default");
    EXPECT_EQ(c.routes[0].prefix, prefix("0.0.0.0/0"));
    EXPECT_EQ(c.routes[0].via, ip("192.0.2.254"));
    EXPECT_EQ(c.routes[0].port, "up");
    EXPECT_EQ(c.routes[1].vrf, "blue");
    EXPECT_EQ(c.routes[1].via, ip("198.51.100.126"));
    EXPECT_EQ(c.routes[2].vrf, "red");
    EXPECT_EQ(c.routes[2].prefix, prefix("203.0.113.0/24"));
    EXPECT_FALSE(c.routes[2].via.has_value());
    EXPECT_EQ(c.routes[2].port, "sink");
    EXPECT_EQ(c.routes[3].vrf, "default");

    EXPECT_EQ(c.cluster.pod_cidrs, (std::vector<IpPrefix>{prefix("10.244.0.0/16"), prefix("10.245.0.0/16")}));
    EXPECT_EQ(c.cluster.service_cidrs, (std::vector<IpPrefix>{prefix("10.96.0.0/12")}));
    EXPECT_EQ(c.cluster.node_ips, (std::vector<IpAddr>{ip("172.18.0.2"), ip("172.18.0.3")}));
    EXPECT_EQ(c.default_action, DefaultAction::drop);
    EXPECT_EQ(c.sessions.max_sessions, 1000u);
    EXPECT_EQ(c.sessions.max_sessions_ipv6, 1000u);  // not given: as many as max
    EXPECT_EQ(c.sessions.port_min, 2000);
    EXPECT_EQ(c.sessions.port_max, 3000);
    EXPECT_EQ(c.sessions.timeouts.tcp_established_s, 1u);
    EXPECT_EQ(c.sessions.timeouts.tcp_transitory_s, 2u);
    EXPECT_EQ(c.sessions.timeouts.udp_s, 3u);
    EXPECT_EQ(c.sessions.timeouts.icmp_s, 4u);
    EXPECT_EQ(c.arp.max_neighbors, 10u);
    EXPECT_EQ(c.arp.hold_packets, 0u);
    EXPECT_EQ(c.arp.retry_ms, 100u);
    EXPECT_EQ(c.arp.reachable_s, 20u);
    EXPECT_EQ(c.arp.probes, 5u);
    EXPECT_EQ(c.arp.unused_s, 90u);
    EXPECT_EQ(c.icmp.errors_per_second, 0u);
    EXPECT_EQ(c.icmp.burst, 7u);
    EXPECT_EQ(c.reassembly.max_datagrams, 64u);
    EXPECT_EQ(c.reassembly.max_fragments, 4u);
    EXPECT_EQ(c.reassembly.timeout_ms, 500u);
    ASSERT_TRUE(c.ingress.via);
    EXPECT_EQ(net::to_string(*c.ingress.via), "10.244.1.254");
    EXPECT_EQ(c.ingress.port, "pods");
    EXPECT_EQ(c.arp.announce_count, 0u);
    EXPECT_EQ(c.arp.announce_interval_ms, 250u);
    EXPECT_EQ(c.node.name, "gw-1.example.com");
    EXPECT_EQ(c.node.labels, (std::map<std::string, std::string>{{"egw.example.com/gateway", "true"}, {"zone", ""}}));
    EXPECT_EQ(c.state.source, StateSource::kubernetes);
    EXPECT_EQ(c.state.path, "");
    EXPECT_EQ(c.state.kubeconfig, "/etc/kubernetes/admin.conf");
    EXPECT_FALSE(c.policy.enforce_egress_firewall(c.state.source)) << "off by default with the kubernetes source";
}

TEST(Load, CommentsAreAccepted) {
    Config c = load_text(R"(// leading comment
    {
      // line comment before a key
      "eal": {"vdevs": ["net_tap0", /* inline */ "net_tap1"]},
      "workers": [1], // trailing comment
      /* block
         comment */
      "ports": [{"name": "a", "device": "net_tap0", "role": "inside"},
                {"name": "b", "device": "net_tap1", "role": "outside"}],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
      "node": {"name": "gw-1"},
      "state": {"path": "m"}
    }
    // trailing comment)",
                         kFile);
    EXPECT_EQ(c.ports.size(), 2u);
}

// Ingress next hops of either family, or both: each of its own family, on-link on the port (an
// IPv6 link-local one always is).
TEST(Load, IngressTakesAnIpv6NextHopBesideOrInsteadOfTheIpv4One) {
    json j = base();
    j["ports"][0]["addresses"].push_back("fd00:10:244:1::1/64");
    j["ingress"] = json::parse(R"({"via6": "fd00:10:244:1::fe", "port": "in"})");
    Config c = load_text(j.dump(), kFile);
    EXPECT_FALSE(c.ingress.via);
    ASSERT_TRUE(c.ingress.via6);
    EXPECT_EQ(net::to_string(*c.ingress.via6), "fd00:10:244:1::fe");
    EXPECT_EQ(c.ingress.port, "in");
    j["ingress"] = json::parse(R"({"via": "10.244.1.254", "via6": "fe80::1", "port": "in"})");
    c = load_text(j.dump(), kFile);
    ASSERT_TRUE(c.ingress.via);
    ASSERT_TRUE(c.ingress.via6);
    EXPECT_EQ(net::to_string(*c.ingress.via), "10.244.1.254");
    EXPECT_EQ(net::to_string(*c.ingress.via6), "fe80::1");
}

TEST(Load, DefaultVrfIsInsertedFirst) {
    Config c = load_text(base().dump(), kFile);
    ASSERT_EQ(c.vrfs.size(), 2u);
    EXPECT_EQ(c.vrfs[0].name, "default");
    EXPECT_EQ(c.vrfs[0].table, 254u);
    EXPECT_EQ(c.vrfs[1].name, "blue");
}

TEST(Load, DefaultVrfMayBeListedAnywhere) {
    json j = base();
    j["vrfs"] = json::parse(R"([{"name": "blue", "table": 100}, {"name": "default", "table": 254}])");
    Config c = load_text(j.dump(), kFile);
    ASSERT_EQ(c.vrfs.size(), 2u);
    EXPECT_EQ(c.vrfs[0].name, "default");
    EXPECT_EQ(c.vrfs[1].name, "blue");

    j["vrfs"] = json::parse(R"([{"name": "default"}, {"name": "blue", "table": 100}])");
    c = load_text(j.dump(), kFile);
    ASSERT_EQ(c.vrfs.size(), 2u);
    EXPECT_EQ(c.vrfs[0].table, 254u);
}

TEST(Load, LcoreMappingSyntaxIsPassedThrough) {
    json j = base();
    j["eal"]["lcores"] = "0@0,(1-2)@(4-5)";
    j["workers"] = {1, 2};
    Config c = load_text(j.dump(), kFile);
    EXPECT_EQ(c.eal.lcores, "0@0,(1-2)@(4-5)");
    EXPECT_EQ(c.workers, (std::vector<unsigned>{1, 2}));
}

TEST(Load, LcoreMappingForms) {
    // Every form EAL's --lcores takes: one id, a range, a bracketed list, with or without @CPUS.
    for (const char* lcores :
         {"0@0,1@1,2@2", "0,1-2@(3,5-6)", "(0-2)@0", "0-2@1", "0@(0-3),(1,2)@(1-1000)", "(0,1,2)"}) {
        json j = base();
        j["eal"]["lcores"] = lcores;
        j["workers"] = {1, 2};
        EXPECT_EQ(load_text(j.dump(), kFile).eal.lcores, lcores) << lcores;
    }
}

TEST(Load, LcoreListsWithGaps) {
    json j = base();
    j["eal"]["lcores"] = "0-1,4,6-7";
    j["workers"] = {4, 7, 1};
    Config c = load_text(j.dump(), kFile);
    EXPECT_EQ(c.workers, (std::vector<unsigned>{4, 7, 1}));
}

TEST(Load, NegativeZeroIsZero) {
    Config c = load_text(R"({"eal": {"vdevs": ["net_tap0", "net_tap1"], "main_lcore": -0}, "workers": [1],
      "ports": [{"name": "a", "device": "net_tap0", "role": "inside"}, {"name": "b", "device": "net_tap1", "role": "outside"}],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"]}, "node": {"name": "gw-1"}, "state": {"path": "m"}})",
                         kFile);
    EXPECT_EQ(c.eal.main_lcore, 0u);
}

TEST(StatePath, ResolvedAgainstTheConfigDirectory) {
    json j = base();
    EXPECT_EQ(load_text(j.dump(), "/srv/egw/egw.json").state.path, "/srv/egw/manifests");
    j["state"]["path"] = "../shared/./manifests/";
    EXPECT_EQ(load_text(j.dump(), "/srv/egw/egw.json").state.path, "/srv/shared/manifests");
    j["state"]["path"] = ".";
    EXPECT_EQ(load_text(j.dump(), "/srv/egw/egw.json").state.path, "/srv/egw");
    j["state"]["path"] = "/var/lib/egw/manifests";
    EXPECT_EQ(load_text(j.dump(), "/srv/egw/egw.json").state.path, "/var/lib/egw/manifests");
}

TEST(StatePath, RelativeConfigFileIsAnchoredAtTheWorkingDirectory) {
    json j = base();
    const fs::path want = (fs::current_path() / "sub" / "dir" / "manifests").lexically_normal();
    EXPECT_EQ(load_text(j.dump(), "sub/dir/egw.json").state.path, want.string());
    EXPECT_EQ(load_text(j.dump(), "egw.json").state.path, (fs::current_path() / "manifests").string());
}

TEST(StatePath, LoadFileResolvesNextToTheFile) {
    TempDir dir;
    json j = base();
    j["state"]["path"] = "demo-manifests";
    fs::path file = dir.write("etc/egw.json", "// a comment\n" + j.dump(2));
    Config c = load_file(file.string());
    EXPECT_EQ(c.file, file.string());
    EXPECT_EQ(c.state.path, (dir.path() / "etc" / "demo-manifests").string());
    EXPECT_FALSE(fs::exists(c.state.path));  // need not exist at load time
}

TEST(StatePath, EmptyKubeconfigAndPollAreAcceptedWithEitherSource) {
    json j = base();
    j["state"] = json::parse(R"({"source": "files", "path": "m", "poll_ms": 500, "kubeconfig": ""})");
    Config c = load_text(j.dump(), "/srv/egw/egw.json");
    EXPECT_EQ(c.state.poll_ms, 500u);
    EXPECT_EQ(c.state.kubeconfig, "");
    j["state"] = json::parse(R"({"source": "kubernetes", "poll_ms": 500, "kubeconfig": ""})");
    c = load_text(j.dump(), "/srv/egw/egw.json");
    EXPECT_EQ(c.state.source, StateSource::kubernetes);
    EXPECT_EQ(c.state.kubeconfig, "");
}

TEST(StatePath, KubernetesElectionAndLeaseTimings) {
    json j = base();
    j["state"] = json::parse(R"({"source": "kubernetes"})");
    Config c = load_text(j.dump(), "/srv/egw/egw.json");
    EXPECT_EQ(c.state.election, Election::leader);
    EXPECT_EQ(c.state.lease_namespace, "");
    EXPECT_EQ(c.state.lease_duration_s, 2u);
    EXPECT_EQ(c.state.renew_deadline_ms, 1500u);
    EXPECT_EQ(c.state.retry_period_ms, 500u);
    EXPECT_EQ(c.state.refusal_grace_ms, 5000u);
    j["state"] = json::parse(R"({"source": "kubernetes", "election": "external", "lease_namespace": "egw-system",
                                 "lease_duration_s": 4, "renew_deadline_ms": 3000, "retry_period_ms": 500,
                                 "refusal_grace_ms": 0})");
    c = load_text(j.dump(), "/srv/egw/egw.json");
    EXPECT_EQ(c.state.election, Election::external);
    EXPECT_STREQ(to_string(c.state.election), "external");
    EXPECT_EQ(c.state.lease_namespace, "egw-system");
    EXPECT_EQ(c.state.lease_duration_s, 4u);
    EXPECT_EQ(c.state.renew_deadline_ms, 3000u);
    EXPECT_EQ(c.state.retry_period_ms, 500u);
    EXPECT_EQ(c.state.refusal_grace_ms, 0u);  // every refusal is a verdict at once
}

TEST(StatePath, KubeconfigIsResolvedToo) {
    json j = base();
    j["state"] = json::parse(R"({"source": "kubernetes", "kubeconfig": "kube/config"})");
    EXPECT_EQ(load_text(j.dump(), "/srv/egw/egw.json").state.kubeconfig, "/srv/egw/kube/config");
    j["state"] = json::parse(R"({"source": "kubernetes"})");
    Config c = load_text(j.dump(), "/srv/egw/egw.json");
    EXPECT_EQ(c.state.kubeconfig, "");
    EXPECT_EQ(c.state.path, "");
}

// ---------------------------------------------------------------------------------------------
// File-level errors
// ---------------------------------------------------------------------------------------------

TEST(FileErrors, MissingFileNamesTheFile) {
    TempDir dir;
    const std::string path = (dir.path() / "missing.json").string();
    try {
        load_file(path);
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.file(), path);
        EXPECT_EQ(std::string(e.what()), path + ": $: expected a readable file, got \"No such file or directory\"");
    }
}

TEST(FileErrors, DirectoryIsNotAFile) {
    TempDir dir;
    const std::string path = dir.path().string();
    try {
        load_file(path);
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), path + ": $: expected a readable file, got \"Is a directory\"");
    }
}

TEST(FileErrors, LoadFileNamesTheFileInValidationErrors) {
    TempDir dir;
    json j = base();
    j["workers"] = {9};
    fs::path file = dir.write("bad.json", j.dump(2));
    try {
        load_file(file.string());
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.file(), file.string());
        EXPECT_EQ(e.path(), "$.workers[0]");
        EXPECT_EQ(std::string(e.what()),
                  file.string() + ": $.workers[0]: expected one of the lcores \"0-1\" ($.eal.lcores: 0,1), got 9");
    }
}

TEST(FileErrors, SyntaxErrorNamesLineAndColumn) {
    EXPECT_EQ(error_of("{\n  \"workers\": [1],\n  }"),
              msg("$",
                  "expected valid JSON, got a syntax error at line 3, column 3 (syntax error while parsing "
                  "object key - unexpected '}'; expected string literal)"));
    EXPECT_EQ(error_of("// only a comment\n{\"workers\": [1,]}"),
              msg("$",
                  "expected valid JSON, got a syntax error at line 2, column 16 (syntax error while parsing "
                  "value - unexpected ']'; expected '[', '{', or a literal)"));
}

TEST(FileErrors, SyntaxErrorInAFileNamesTheFile) {
    TempDir dir;
    fs::path file = dir.write("broken.json", "{\n  \"workers\": [1]\n  \"ports\": []\n}\n");
    try {
        load_file(file.string());
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.file(), file.string());
        EXPECT_EQ(e.path(), "$");
        // nlohmann/json stops at the end of the unexpected token: the closing quote of "ports".
        EXPECT_NE(std::string(e.what()).find("line 3, column 9"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind(file.string() + ": $: expected valid JSON, got a syntax error", 0), 0u)
            << e.what();
    }
}

TEST(FileErrors, EmptyAndTrailingGarbage) {
    EXPECT_EQ(error_of(""), msg("$",
                                "expected valid JSON, got a syntax error at line 1, column 1 (syntax error "
                                "while parsing value - unexpected end of input; expected '[', '{', or a "
                                "literal)"));
    EXPECT_NE(error_of(base().dump() + " {}").find(": $: expected valid JSON, got a syntax error at line 1"),
              std::string::npos);
}

TEST(FileErrors, TopLevelMustBeAnObject) {
    EXPECT_EQ(error_of("[]"), msg("$", "expected a JSON object, got an empty array"));
    EXPECT_EQ(error_of("\"x\""), msg("$", "expected a JSON object, got \"x\""));
}

TEST(FileErrors, TheExampleFromTheDocs) {
    json j = base();
    j["ports"][1]["addresses"][0] = "10.0.0.300/24";
    try {
        load_text(j.dump(), "config/demo.json");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(),
                     "config/demo.json: $.ports[1].addresses[0]: expected an IPv4 or IPv6 prefix like 10.0.0.1/24 or "
                     "2001:db8::1/64, got "
                     "\"10.0.0.300/24\"");
        EXPECT_EQ(e.path(), "$.ports[1].addresses[0]");
        EXPECT_EQ(e.file(), "config/demo.json");
    }
}

TEST(FileErrors, DuplicateJsonKeys) {
    EXPECT_EQ(error_of(R"({"workers": [1], "workers": [1]})"),
              msg("$.workers", "expected each key at most once per object, got \"workers\" twice"));
    std::string text = base().dump(2);
    // Repeat a key inside the second port.
    const std::string needle = "\"name\": \"out\",";
    text.replace(text.find(needle), needle.size(), needle + " \"mtu\": 1500, \"mtu\": 9000,");
    EXPECT_EQ(error_of(text), msg("$.ports[1].mtu", "expected each key at most once per object, got \"mtu\" twice"));
    EXPECT_EQ(error_of(R"({"node": {"labels": {"a/b": "1", "a/b": "2"}}})"),
              msg("$.node.labels[\"a/b\"]", "expected each key at most once per object, got \"a/b\" twice"));
    EXPECT_EQ(error_of(R"({"x": [[1, 2], [{"k": 1, "k": 2}]]})"),
              msg("$.x[1][0].k", "expected each key at most once per object, got \"k\" twice"));
}

TEST(Sessions, TcpOpenStrictIsRead) {
    json j = base();
    j["sessions"] = {{"tcp_open", "strict"}};
    EXPECT_EQ(load_text(j.dump(), kFile).sessions.tcp_open, TcpOpen::strict);
}

TEST(Sessions, MaxPerPodAndHalfClosedTimeoutAreRead) {
    json j = base();
    j["sessions"] = json::parse(R"({"max_per_pod": 500, "timeouts": {"tcp_half_closed": 90}})");
    Config c = load_text(j.dump(), kFile);
    EXPECT_EQ(c.sessions.max_per_pod, 500u);
    EXPECT_EQ(c.sessions.timeouts.tcp_half_closed_s, 90u);
}

TEST(FileErrors, ErrorsInDocumentOrderFirstOneWins) {
    json j = base();
    j["workers"] = {7};
    j["sessions"] = {{"max", 0}};
    EXPECT_EQ(error_of_json(j), msg("$.workers[0]", "expected one of the lcores \"0-1\" ($.eal.lcores: 0,1), got 7"));
}

// ---------------------------------------------------------------------------------------------
// One case per field error, each with the whole message
// ---------------------------------------------------------------------------------------------

struct ErrorCase {
    const char* name;
    std::function<void(json&)> mutate;
    const char* path;
    const char* expected;
};

// Shown by GoogleTest when a case fails.
void PrintTo(const ErrorCase& c, std::ostream* os) {
    *os << c.name << " (" << c.path << ")";
}

class FieldError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(FieldError, NamesPathAndExpectation) {
    const ErrorCase& c = GetParam();
    json j = base();
    c.mutate(j);
    EXPECT_EQ(error_of_json(j), msg(c.path, c.expected));
}

const char* const kTopKeys =
    "eal, workers, mempool, ports, neighbors, vrfs, routes, cluster, default_action, sessions, arp, icmp, reassembly, "
    "ingress, node, state, metrics, sync, egress_ip, policy";
const char* const kPortKeys = "name, device, role, vrf, addresses, mac, mtu, rx_desc, tx_desc, queues";

#define J(text) json::parse(text)

const ErrorCase kCases[] = {
    // --- unknown keys, everywhere ------------------------------------------------------------
    {"UnknownTopLevel", [](json& j) { j["worker"] = {1}; }, "$.worker",
     "unknown key \"worker\", expected one of: eal, workers, mempool, ports, neighbors, vrfs, routes, cluster, "
     "default_action, sessions, arp, icmp, reassembly, ingress, node, state, metrics, sync, egress_ip, policy"},
    {"UnknownEal", [](json& j) { j["eal"]["lcore"] = "0-1"; }, "$.eal.lcore",
     "unknown key \"lcore\", expected one of: lcores, main_lcore, no_huge, memory_mb, file_prefix, vdevs, "
     "pci_allow, extra_args"},
    {"UnknownMempool", [](json& j) { j["mempool"] = {{"size", 1}}; }, "$.mempool.size",
     "unknown key \"size\", expected one of: mbufs, cache, data_room"},
    {"UnknownPort", [](json& j) { j["ports"][1]["ip"] = "1.2.3.4"; }, "$.ports[1].ip",
     "unknown key \"ip\", expected one of: name, device, parent, vlan, role, vrf, addresses, mac, mtu, rx_desc, "
     "tx_desc, queues"},
    {"UnknownNeighbor",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.9", "mac": "02:00:00:00:00:09", "ttl": 1}])"); },
     "$.neighbors[0].ttl", "unknown key \"ttl\", expected one of: port, ip, mac"},
    {"UnknownVrf", [](json& j) { j["vrfs"][0]["id"] = 1; }, "$.vrfs[0].id",
     "unknown key \"id\", expected one of: name, table"},
    {"UnknownRoute",
     [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "port": "out", "gateway": "192.0.2.254"}])"); },
     "$.routes[0].gateway", "unknown key \"gateway\", expected one of: vrf, prefix, via, port"},
    {"UnknownCluster", [](json& j) { j["cluster"]["pod_cidr"] = "10.0.0.0/8"; }, "$.cluster.pod_cidr",
     "unknown key \"pod_cidr\", expected one of: pod_cidrs, service_cidrs, node_ips"},
    {"UnknownSessions", [](json& j) { j["sessions"] = {{"max_sessions", 5}}; }, "$.sessions.max_sessions",
     "unknown key \"max_sessions\", expected one of: max, max_ipv6, port_min, port_max, timeouts, tcp_open, max_per_pod"},
    {"TcpOpen", [](json& j) { j["sessions"] = {{"tcp_open", "syn"}}; }, "$.sessions.tcp_open",
     "expected \"loose\" or \"strict\", got \"syn\""},
    {"UnknownTimeout", [](json& j) { j["sessions"] = J(R"({"timeouts": {"tcp": 5}})"); }, "$.sessions.timeouts.tcp",
     "unknown key \"tcp\", expected one of: tcp_established, tcp_transitory, tcp_half_closed, udp, icmp"},
    {"TimeoutHalfClosedZero", [](json& j) { j["sessions"] = J(R"({"timeouts": {"tcp_half_closed": 0}})"); },
     "$.sessions.timeouts.tcp_half_closed", "expected an integer from 1 to 604800, got 0"},
    {"MaxPerPodNegative", [](json& j) { j["sessions"] = {{"max_per_pod", -1}}; }, "$.sessions.max_per_pod",
     "expected an integer from 0 to 268435456, got -1"},
    {"UnknownArp", [](json& j) { j["arp"] = {{"timeout", 5}}; }, "$.arp.timeout",
     "unknown key \"timeout\", expected one of: max_neighbors, hold_packets, retry_ms, reachable_s, probes, unused_s, announce_count, "
     "announce_interval_ms"},
    {"UnknownNode", [](json& j) { j["node"]["label"] = json::object(); }, "$.node.label",
     "unknown key \"label\", expected one of: name, labels"},
    {"UnknownState", [](json& j) { j["state"]["dir"] = "x"; }, "$.state.dir",
     "unknown key \"dir\", expected one of: source, path, poll_ms, kubeconfig, election, lease_namespace, "
     "lease_duration_s, renew_deadline_ms, retry_period_ms, refusal_grace_ms"},
    {"UnknownKeyNeedsQuoting", [](json& j) { j["eal"]["no huge"] = true; }, "$.eal[\"no huge\"]",
     "unknown key \"no huge\", expected one of: lcores, main_lcore, no_huge, memory_mb, file_prefix, vdevs, "
     "pci_allow, extra_args"},

    // --- wrong JSON types -------------------------------------------------------------------
    {"EalNotObject", [](json& j) { j["eal"] = "x"; }, "$.eal", "expected an object, got \"x\""},
    {"BoolAsString", [](json& j) { j["eal"]["no_huge"] = "yes"; }, "$.eal.no_huge", "expected true or false, got \"yes\""},
    {"BoolAsNumber", [](json& j) { j["eal"]["no_huge"] = 1; }, "$.eal.no_huge", "expected true or false, got 1"},
    {"LcoresAsNumber", [](json& j) { j["eal"]["lcores"] = 3; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got 3"},
    {"VdevsNotArray", [](json& j) { j["eal"]["vdevs"] = "net_tap0"; }, "$.eal.vdevs",
     "expected an array of virtual device specifications like \"net_tap0,iface=egw0\", got \"net_tap0\""},
    {"ExtraArgNotString", [](json& j) { j["eal"]["extra_args"] = {"--a", 5}; }, "$.eal.extra_args[1]",
     "expected non-empty EAL arguments, got 5"},
    {"WorkersNotArray", [](json& j) { j["workers"] = 1; }, "$.workers",
     "expected a non-empty array of worker lcore ids like [1], got 1"},
    {"WorkerAsString", [](json& j) { j["workers"] = {"1"}; }, "$.workers[0]", "expected an integer from 0 to 127, got \"1\""},
    {"PortsNotArray", [](json& j) { j["ports"] = json::object(); }, "$.ports",
     "expected a non-empty array of ports, got an empty object"},
    {"PortNotObject", [](json& j) { j["ports"][0] = "in"; }, "$.ports[0]",
     "expected a port like {\"name\": \"ext1\", \"device\": \"net_af_packet0\", \"role\": \"outside\"}, got \"in\""},
    {"PortNameNumber", [](json& j) { j["ports"][0]["name"] = 1; }, "$.ports[0].name",
     "expected a port name of 1 to 32 characters from [A-Za-z0-9._-], got 1"},
    {"AddressesNotArray", [](json& j) { j["ports"][0]["addresses"] = "10.244.1.1/24"; }, "$.ports[0].addresses",
     "expected an array of IPv4 or IPv6 prefixes like [\"10.0.0.1/24\", \"2001:db8::1/64\"], got \"10.244.1.1/24\""},
    {"MacNull", [](json& j) { j["ports"][0]["mac"] = nullptr; }, "$.ports[0].mac",
     "expected a MAC address like 02:00:00:00:00:01, got null"},
    {"VrfsNotArray", [](json& j) { j["vrfs"] = J(R"({"blue": 100})"); }, "$.vrfs",
     "expected an array of VRFs like [{\"name\": \"blue\", \"table\": 100}], got an object"},
    {"RoutesNotArray", [](json& j) { j["routes"] = json::object(); }, "$.routes",
     "expected an array of routes, got an empty object"},
    {"NeighborsNotArray", [](json& j) { j["neighbors"] = true; }, "$.neighbors",
     "expected an array of static neighbours, got true"},
    {"PodCidrsNotArray", [](json& j) { j["cluster"]["pod_cidrs"] = "10.244.0.0/16"; }, "$.cluster.pod_cidrs",
     "expected a non-empty array of IPv4 or IPv6 prefixes like [\"10.244.0.0/16\", \"fd00:10:244::/56\"], got \"10.244.0.0/16\""},
    {"NodeIpsNotArray", [](json& j) { j["cluster"]["node_ips"] = "172.18.0.2"; }, "$.cluster.node_ips",
     "expected an array of IPv4 or IPv6 addresses like [\"172.18.0.2\", \"fc00:f853:ccd:e793::2\"], got \"172.18.0.2\""},
    {"DefaultActionNumber", [](json& j) { j["default_action"] = 1; }, "$.default_action",
     "expected \"route\", \"masquerade\" or \"drop\", got 1"},
    {"LabelsArray", [](json& j) { j["node"]["labels"] = {"a"}; }, "$.node.labels",
     "expected an object of label keys to string values, got an array"},
    {"LabelValueBool", [](json& j) { j["node"]["labels"]["egw.example.com/gateway"] = true; },
     "$.node.labels[\"egw.example.com/gateway\"]",
     "expected a label value of at most 63 characters from [A-Za-z0-9._-], alphanumeric at both ends, got true"},
    {"StateNotObject", [](json& j) { j["state"] = "files"; }, "$.state",
     "expected an object like {\"source\": \"files\", \"path\": \"manifests\"}, got \"files\""},
    {"ElectionWithFiles", [](json& j) { j["state"]["election"] = "leader"; }, "$.state.election",
     "expected no election with source \"files\" (it is only read with source \"kubernetes\"), got \"leader\""},
    {"LeaseTimingWithFiles", [](json& j) { j["state"]["lease_duration_s"] = 15; }, "$.state.lease_duration_s",
     "expected no lease_duration_s with source \"files\" (it is only read with source \"kubernetes\"), got 15"},
    {"ElectionUnknown", [](json& j) { j["state"] = J(R"({"source": "kubernetes", "election": "raft"})"); },
     "$.state.election", "expected \"leader\" or \"external\", got \"raft\""},
    {"LeaseNamespaceInvalid", [](json& j) { j["state"] = J(R"({"source": "kubernetes", "lease_namespace": "Egw_System"})"); },
     "$.state.lease_namespace",
     "expected a namespace name (lower-case letters, digits and '-', at most 63), or \"\" for the credentials' "
     "namespace, got \"Egw_System\""},
    {"LeaseDurationZero", [](json& j) { j["state"] = J(R"({"source": "kubernetes", "lease_duration_s": 0})"); },
     "$.state.lease_duration_s", "expected an integer from 1 to 3600, got 0"},
    {"RenewDeadlineNotShorterThanLease",
     [](json& j) { j["state"] = J(R"({"source": "kubernetes", "lease_duration_s": 5, "renew_deadline_ms": 5000})"); },
     "$.state.renew_deadline_ms", "expected renew_deadline_ms shorter than lease_duration_s (5000 ms), got 5000"},
    {"DefaultRenewDeadlineTooLongForShortLease",
     [](json& j) { j["state"] = J(R"({"source": "kubernetes", "lease_duration_s": 1})"); },
     "$.state.lease_duration_s", "expected renew_deadline_ms shorter than lease_duration_s (1000 ms), got 1500"},
    {"RetryNotShorterThanRenew",
     [](json& j) {
         j["state"] = J(R"({"source": "kubernetes", "lease_duration_s": 5, "renew_deadline_ms": 3000,
                            "retry_period_ms": 3000})");
     },
     "$.state.retry_period_ms", "expected retry_period_ms shorter than renew_deadline_ms (3000 ms), got 3000"},

    // --- numbers: range, sign, non-integer ----------------------------------------------------
    {"Negative", [](json& j) { j["ports"][0]["mtu"] = -1; }, "$.ports[0].mtu", "expected an integer from 68 to 16128, got -1"},
    {"BelowIpv6Minimum",
     [](json& j) {
         j["ports"][0]["addresses"].push_back("fd00:10:244:1::1/64");
         j["ports"][0]["mtu"] = 1279;
     },
     "$.ports[0].mtu", "expected at least 1280 on a port with an IPv6 address (RFC 8200), got 1279"},
    {"Fraction", [](json& j) { j["ports"][0]["mtu"] = 1500.5; }, "$.ports[0].mtu",
     "expected an integer from 68 to 16128, got 1500.5"},
    {"FloatWithoutFraction", [](json& j) { j["ports"][0]["mtu"] = 1500.0; }, "$.ports[0].mtu",
     "expected an integer from 68 to 16128, got 1500.0"},
    {"NumberAsString", [](json& j) { j["ports"][0]["mtu"] = "1500"; }, "$.ports[0].mtu",
     "expected an integer from 68 to 16128, got \"1500\""},
    {"TooLarge", [](json& j) { j["ports"][0]["mtu"] = 70000; }, "$.ports[0].mtu",
     "expected an integer from 68 to 16128, got 70000"},
    {"TooSmall", [](json& j) { j["ports"][0]["mtu"] = 67; }, "$.ports[0].mtu", "expected an integer from 68 to 16128, got 67"},
    {"RxDescZero", [](json& j) { j["ports"][0]["rx_desc"] = 0; }, "$.ports[0].rx_desc",
     "expected an integer from 16 to 32768, got 0"},
    {"QueuesZero", [](json& j) { j["ports"][0]["queues"] = 0; }, "$.ports[0].queues",
     "expected an integer from 1 to 16, got 0"},
    {"QueuesBeyondWorkers", [](json& j) { j["ports"][1]["queues"] = 17; }, "$.ports[1].queues",
     "expected an integer from 1 to 16, got 17"},
    {"TxDescHuge", [](json& j) { j["ports"][0]["tx_desc"] = 1u << 20; }, "$.ports[0].tx_desc",
     "expected an integer from 16 to 32768, got 1048576"},
    {"MemoryZero", [](json& j) { j["eal"]["memory_mb"] = 0; }, "$.eal.memory_mb",
     "expected an integer from 1 to 1048576, got 0"},
    {"Uint64Overflow", [](json& j) { j["eal"]["memory_mb"] = 18446744073709551615ull; }, "$.eal.memory_mb",
     "expected an integer from 1 to 1048576, got 18446744073709551615"},
    {"MainLcoreTooBig", [](json& j) { j["eal"]["main_lcore"] = 128; }, "$.eal.main_lcore",
     "expected an integer from 0 to 127, got 128"},
    {"MbufsZero", [](json& j) { j["mempool"] = {{"mbufs", 0}}; }, "$.mempool.mbufs",
     "expected an integer from 1 to 67108864, got 0"},
    {"CacheOverDpdkMax", [](json& j) { j["mempool"] = {{"cache", 513}}; }, "$.mempool.cache",
     "expected an integer from 0 to 512, got 513"},
    {"CacheTooBigForPool", [](json& j) { j["mempool"] = {{"mbufs", 300}, {"cache", 256}}; }, "$.mempool.cache",
     "expected a cache of at most mbufs / 1.5 (200 for 300 mbufs), got 256"},
    {"SmallPoolDefaultCache", [](json& j) { j["mempool"] = {{"mbufs", 100}}; }, "$.mempool.mbufs",
     "expected a cache of at most mbufs / 1.5 (66 for 100 mbufs), got 256"},
    {"DataRoomTooSmall", [](json& j) { j["mempool"] = {{"data_room", 128}}; }, "$.mempool.data_room",
     "expected an integer from 718 to 65535, got 128"},
    // A buffer must hold the headers the input stage pulls into a chained frame's first mbuf.
    {"DataRoomBelowAChainsFirstSegment", [](json& j) { j["mempool"] = {{"data_room", 717}}; }, "$.mempool.data_room",
     "expected an integer from 718 to 65535, got 717"},
    {"SessionsMaxZero", [](json& j) { j["sessions"] = {{"max", 0}}; }, "$.sessions.max",
     "expected an integer from 1 to 268435456, got 0"},
    {"SessionsMaxIpv6Negative", [](json& j) { j["sessions"] = {{"max_ipv6", -1}}; }, "$.sessions.max_ipv6",
     "expected an integer from 0 to 268435456, got -1"},
    {"SessionsMaxIpv6NotANumber", [](json& j) { j["sessions"] = {{"max_ipv6", "none"}}; }, "$.sessions.max_ipv6",
     "expected an integer from 0 to 268435456, got \"none\""},
    {"PortMinZero", [](json& j) { j["sessions"] = {{"port_min", 0}}; }, "$.sessions.port_min",
     "expected an integer from 1 to 65535, got 0"},
    {"PortMaxTooBig", [](json& j) { j["sessions"] = {{"port_max", 65536}}; }, "$.sessions.port_max",
     "expected an integer from 1 to 65535, got 65536"},
    {"PortMinAboveMax", [](json& j) { j["sessions"] = {{"port_min", 2000}, {"port_max", 1999}}; }, "$.sessions.port_max",
     "expected port_min <= port_max, got port_min 2000 and port_max 1999"},
    {"PortMinAboveDefaultMax", [](json& j) { j["sessions"] = {{"port_min", 1024}, {"port_max", 1000}}; },
     "$.sessions.port_max", "expected port_min <= port_max, got port_min 1024 and port_max 1000"},
    {"PortRangeSmallerThanWorkers",
     [](json& j) {
         j["eal"]["lcores"] = "0-2";
         j["workers"] = {1, 2};
         j["sessions"] = {{"port_min", 5000}, {"port_max", 5000}};
     },
     "$.sessions.port_max", "expected a NAT port range of at least 2 ports (one block per worker), got 1"},
    {"TimeoutZero", [](json& j) { j["sessions"] = J(R"({"timeouts": {"udp": 0}})"); }, "$.sessions.timeouts.udp",
     "expected an integer from 1 to 604800, got 0"},
    {"TimeoutNegative", [](json& j) { j["sessions"] = J(R"({"timeouts": {"icmp": -10}})"); }, "$.sessions.timeouts.icmp",
     "expected an integer from 1 to 604800, got -10"},
    {"TimeoutFraction", [](json& j) { j["sessions"] = J(R"({"timeouts": {"tcp_established": 0.5}})"); },
     "$.sessions.timeouts.tcp_established", "expected an integer from 1 to 604800, got 0.5"},
    {"TimeoutTransitoryHuge", [](json& j) { j["sessions"] = J(R"({"timeouts": {"tcp_transitory": 604801}})"); },
     "$.sessions.timeouts.tcp_transitory", "expected an integer from 1 to 604800, got 604801"},
    {"ArpRetryTooFast", [](json& j) { j["arp"] = {{"retry_ms", 5}}; }, "$.arp.retry_ms",
     "expected an integer from 10 to 60000, got 5"},
    {"ArpMaxNeighborsZero", [](json& j) { j["arp"] = {{"max_neighbors", 0}}; }, "$.arp.max_neighbors",
     "expected an integer from 1 to 1048576, got 0"},
    {"ArpHoldNegative", [](json& j) { j["arp"] = {{"hold_packets", -1}}; }, "$.arp.hold_packets",
     "expected an integer from 0 to 65536, got -1"},
    {"ArpReachableZero", [](json& j) { j["arp"] = {{"reachable_s", 0}}; }, "$.arp.reachable_s",
     "expected an integer from 1 to 86400, got 0"},
    {"ArpProbesZero", [](json& j) { j["arp"] = {{"probes", 0}}; }, "$.arp.probes",
     "expected an integer from 1 to 100, got 0"},
    {"ArpUnusedTooLong", [](json& j) { j["arp"] = {{"unused_s", 86401}}; }, "$.arp.unused_s",
     "expected an integer from 1 to 86400, got 86401"},
    {"UnknownIcmp", [](json& j) { j["icmp"] = {{"rate", 5}}; }, "$.icmp.rate",
     "unknown key \"rate\", expected one of: errors_per_second, burst"},
    {"IcmpBurstZero", [](json& j) { j["icmp"] = {{"burst", 0}}; }, "$.icmp.burst",
     "expected an integer from 1 to 100000, got 0"},
    {"IcmpRateNegative", [](json& j) { j["icmp"] = {{"errors_per_second", -1}}; }, "$.icmp.errors_per_second",
     "expected an integer from 0 to 1000000, got -1"},
    {"IcmpNotAnObject", [](json& j) { j["icmp"] = 100; }, "$.icmp", "expected an object, got 100"},
    {"ReassemblyNotAnObject", [](json& j) { j["reassembly"] = J("[256]"); }, "$.reassembly",
     "expected an object, got an array"},
    {"UnknownReassembly", [](json& j) { j["reassembly"] = {{"timeout", 5}}; }, "$.reassembly.timeout",
     "unknown key \"timeout\", expected one of: max_datagrams, max_fragments, timeout_ms, max_per_source"},
    {"ReassemblyPerSourceAboveTheTable",
     [](json& j) { j["reassembly"] = {{"max_datagrams", 16}, {"max_per_source", 17}}; }, "$.reassembly.max_per_source",
     "expected at most reassembly.max_datagrams (16), got 17"},
    {"ReassemblyPerSourceZero", [](json& j) { j["reassembly"] = {{"max_per_source", 0}}; },
     "$.reassembly.max_per_source", "expected an integer from 1 to 65536, got 0"},
    {"ReassemblyDatagramsZero", [](json& j) { j["reassembly"] = {{"max_datagrams", 0}}; }, "$.reassembly.max_datagrams",
     "expected an integer from 1 to 65536, got 0"},
    {"ReassemblyFragmentsAboveDpdk", [](json& j) { j["reassembly"] = {{"max_fragments", 9}}; },
     "$.reassembly.max_fragments", "expected an integer from 2 to 8, got 9"},
    {"ReassemblyFragmentsOne", [](json& j) { j["reassembly"] = {{"max_fragments", 1}}; }, "$.reassembly.max_fragments",
     "expected an integer from 2 to 8, got 1"},
    {"ReassemblyTimeoutString", [](json& j) { j["reassembly"] = J(R"({"timeout_ms": "2s"})"); },
     "$.reassembly.timeout_ms", "expected an integer from 10 to 120000, got \"2s\""},
    {"ReassemblyTimeoutTooLong", [](json& j) { j["reassembly"] = {{"timeout_ms", 120001}}; }, "$.reassembly.timeout_ms",
     "expected an integer from 10 to 120000, got 120001"},
    {"UnknownIngress", [](json& j) { j["ingress"] = J(R"({"via": "10.244.1.2", "port": "in", "vrf": "blue"})"); },
     "$.ingress.vrf", "unknown key \"vrf\", expected one of: via, via6, port"},
    {"IngressNotAnObject", [](json& j) { j["ingress"] = "10.244.1.2"; }, "$.ingress",
     "expected an object like {\"via\": \"10.244.1.2\", \"port\": \"pods\"}, got \"10.244.1.2\""},
    {"IngressWithoutPort", [](json& j) { j["ingress"] = J(R"({"via": "10.244.1.2"})"); }, "$.ingress.port",
     "missing required key, expected the name of the inside port toward the cluster"},
    {"IngressUnknownPort", [](json& j) { j["ingress"] = J(R"({"via": "10.244.1.2", "port": "pods"})"); },
     "$.ingress.port", "expected a port declared in $.ports (\"in\", \"out\", \"blue1\"), got \"pods\""},
    {"IngressOnAnOutsidePort", [](json& j) { j["ingress"] = J(R"({"via": "192.0.2.9", "port": "out"})"); },
     "$.ingress.port",
     "expected an inside port (ingress goes into the cluster), got \"out\" which is an outside port"},
    {"IngressViaNotOnLink", [](json& j) { j["ingress"] = J(R"({"via": "10.244.2.2", "port": "in"})"); },
     "$.ingress.via", "expected a next hop on-link on port \"in\" (its addresses are 10.244.1.1/24), got 10.244.2.2"},
    {"IngressViaIpv6", [](json& j) { j["ingress"] = J(R"({"via": "fe80::2", "port": "in"})"); }, "$.ingress.via",
     "expected an IPv4 address (an IPv6 next hop goes in \"via6\"), got fe80::2"},
    {"IngressWithoutNextHop", [](json& j) { j["ingress"] = J(R"({"port": "in"})"); }, "$.ingress",
     "expected a next hop: \"via\" (IPv4), \"via6\" (IPv6) or both, got neither"},
    {"IngressVia6Ipv4", [](json& j) { j["ingress"] = J(R"({"via6": "10.244.1.2", "port": "in"})"); }, "$.ingress.via6",
     "expected an IPv6 address like fd00:10:244:1::2 (an IPv4 next hop goes in \"via\"), got 10.244.1.2"},
    {"IngressVia6NotOnLink", [](json& j) { j["ingress"] = J(R"({"via6": "fd00:10:244:1::2", "port": "in"})"); },
     "$.ingress.via6",
     "expected a next hop on-link on port \"in\" (its addresses are 10.244.1.1/24), got fd00:10:244:1::2"},
    {"IngressVia6Multicast", [](json& j) { j["ingress"] = J(R"({"via6": "ff02::1", "port": "in"})"); },
     "$.ingress.via6", "expected a next hop that is a unicast address, got ff02::1"},
    {"IngressVia6Bad", [](json& j) { j["ingress"] = J(R"({"via6": "fd00::g", "port": "in"})"); }, "$.ingress.via6",
     "expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1, got \"fd00::g\""},
    {"IngressViaIsThePort", [](json& j) { j["ingress"] = J(R"({"via": "10.244.1.1", "port": "in"})"); },
     "$.ingress.via", "expected a next hop other than port \"in\"'s own address, got 10.244.1.1"},
    {"ArpAnnounceCountTooLarge", [](json& j) { j["arp"] = {{"announce_count", 101}}; }, "$.arp.announce_count",
     "expected an integer from 0 to 100, got 101"},
    {"ArpAnnounceIntervalTooShort", [](json& j) { j["arp"] = {{"announce_interval_ms", 5}}; },
     "$.arp.announce_interval_ms", "expected an integer from 10 to 60000, got 5"},
    {"PollTooFast", [](json& j) { j["state"]["poll_ms"] = 1; }, "$.state.poll_ms",
     "expected an integer from 10 to 60000, got 1"},
    {"TableZero", [](json& j) { j["vrfs"][0]["table"] = 0; }, "$.vrfs[0].table",
     "expected an integer from 1 to 4294967294, got 0"},
    {"TableReservedMax", [](json& j) { j["vrfs"][0]["table"] = 4294967295u; }, "$.vrfs[0].table",
     "expected an integer from 1 to 4294967294, got 4294967295"},

    // --- missing required keys and empty required lists ---------------------------------------
    {"MissingWorkers", [](json& j) { j.erase("workers"); }, "$.workers",
     "missing required key, expected a non-empty array of worker lcore ids like [1]"},
    {"EmptyWorkers", [](json& j) { j["workers"] = json::array(); }, "$.workers",
     "expected a non-empty array of worker lcore ids like [1], got an empty array"},
    {"MissingPorts", [](json& j) { j.erase("ports"); }, "$.ports", "missing required key, expected a non-empty array of ports"},
    {"EmptyPorts", [](json& j) { j["ports"] = json::array(); }, "$.ports",
     "expected a non-empty array of ports, got an empty array"},
    {"MissingPortName", [](json& j) { j["ports"][1].erase("name"); }, "$.ports[1].name",
     "missing required key, expected a port name of 1 to 32 characters from [A-Za-z0-9._-]"},
    {"MissingPortDevice", [](json& j) { j["ports"][1].erase("device"); }, "$.ports[1].device",
     "missing required key, expected a DPDK device name like \"net_af_packet0\" or \"0000:01:00.0\" (or \"parent\" "
     "and \"vlan\" for a VLAN)"},

    // --- VLANs (ports with a parent and a VLAN id) ----------------------------------------------
    {"VlanIdZero", [](json& j) { j["ports"].push_back(vlan_port("v0", "out", 0)); }, "$.ports[3].vlan",
     "expected a VLAN id from 1 to 4094, got 0"},
    {"VlanIdTooLarge", [](json& j) { j["ports"].push_back(vlan_port("v4095", "out", 4095)); }, "$.ports[3].vlan",
     "expected a VLAN id from 1 to 4094, got 4095"},
    {"VlanIdNotANumber", [](json& j) { j["ports"].push_back(vlan_port("v", "out", 0)); j["ports"][3]["vlan"] = "100"; },
     "$.ports[3].vlan", "expected a VLAN id from 1 to 4094, got \"100\""},
    {"VlanWithoutId", [](json& j) { j["ports"].push_back(vlan_port("v", "out", 1)); j["ports"][3].erase("vlan"); },
     "$.ports[3].vlan", "missing required key, expected a VLAN id from 1 to 4094"},
    {"VlanIdWithoutParent", [](json& j) { j["ports"].push_back(vlan_port("v", "out", 1)); j["ports"][3].erase("parent"); },
     "$.ports[3].parent", "missing required key, expected the name of a port declared before this one"},
    {"VlanUnknownParent", [](json& j) { j["ports"].push_back(vlan_port("v", "nope", 100)); }, "$.ports[3].parent",
     "expected a port declared before this one in $.ports (\"in\", \"out\", \"blue1\"), got \"nope\""},
    {"VlanParentIsAVlan",
     [](json& j) {
         j["ports"].push_back(vlan_port("v100", "out", 100));
         j["ports"].push_back(vlan_port("v7", "v100", 7));
     },
     "$.ports[4].parent",
     "expected a port with a device as the parent (VLANs are not stacked), got \"v100\", itself a VLAN of \"out\""},
    {"VlanIdTwiceOnAParent",
     [](json& j) {
         j["ports"].push_back(vlan_port("v100", "out", 100));
         j["ports"].push_back(vlan_port("w100", "out", 100));
     },
     "$.ports[4].vlan", "expected each VLAN id once on port \"out\", got 100 which port \"v100\" already has"},
    {"VlanMtuAboveParent",
     [](json& j) {
         j["ports"][1]["mtu"] = 1500;
         j["ports"].push_back(vlan_port("v100", "out", 100));
         j["ports"][3]["mtu"] = 1504;
     },
     "$.ports[3].mtu", "expected at most the MTU of parent port \"out\" (1500) on a VLAN, got 1504"},
    {"VlanWithDevice",
     [](json& j) {
         j["ports"].push_back(vlan_port("v100", "out", 100));
         j["ports"][3]["device"] = "net_tap1";
     },
     "$.ports[3].device", "expected no \"device\" on a VLAN (it uses its parent's), got \"net_tap1\""},
    {"VlanWithMac",
     [](json& j) {
         j["ports"].push_back(vlan_port("v100", "out", 100));
         j["ports"][3]["mac"] = "02:00:00:00:00:01";
     },
     "$.ports[3].mac", "expected no \"mac\" on a VLAN (it uses its parent's), got \"02:00:00:00:00:01\""},
    {"TooManyPortsWithVlans",
     [](json& j) {
         for (unsigned v = 1; v <= 14; ++v) {
             std::string name = "v";  // not "v" + to_string(): gcc 12 warns of a false overlap there
             name += std::to_string(v);
             j["ports"].push_back(vlan_port(name, "out", v));
         }
     },
     "$.ports[16]", "expected at most 16 ports (VLANs count as ports), got 17"},
    {"MissingPortRole", [](json& j) { j["ports"][1].erase("role"); }, "$.ports[1].role",
     "missing required key, expected \"inside\" or \"outside\""},
    {"MissingCluster", [](json& j) { j.erase("cluster"); }, "$.cluster",
     "missing required key, expected an object like {\"pod_cidrs\": [\"10.244.0.0/16\"]}"},
    {"MissingPodCidrs", [](json& j) { j["cluster"] = json::object(); }, "$.cluster.pod_cidrs",
     "missing required key, expected a non-empty array of IPv4 or IPv6 prefixes like [\"10.244.0.0/16\", \"fd00:10:244::/56\"]"},
    {"EmptyPodCidrs", [](json& j) { j["cluster"]["pod_cidrs"] = json::array(); }, "$.cluster.pod_cidrs",
     "expected a non-empty array of IPv4 or IPv6 prefixes like [\"10.244.0.0/16\", \"fd00:10:244::/56\"], got an empty array"},
    {"MissingNode", [](json& j) { j.erase("node"); }, "$.node", "missing required key, expected an object like {\"name\": \"gw-1\"}"},
    {"MissingNodeName", [](json& j) { j["node"] = json::object(); }, "$.node.name",
     "missing required key, expected a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' "
     "and '.', at most 253) like \"gw-1\""},
    {"MissingState", [](json& j) { j.erase("state"); }, "$.state",
     "missing required key, expected an object like {\"source\": \"files\", \"path\": \"manifests\"}"},
    {"MissingStatePath", [](json& j) { j["state"].erase("path"); }, "$.state.path",
     "missing required key, expected the manifest directory, relative to the configuration file's directory, like "
     "\"manifests\" (required with source \"files\")"},
    {"MissingVrfName", [](json& j) { j["vrfs"][0].erase("name"); }, "$.vrfs[0].name",
     "missing required key, expected a VRF name like \"blue\""},
    {"MissingVrfTable", [](json& j) { j["vrfs"][0].erase("table"); }, "$.vrfs[0].table",
     "missing required key, expected a routing table number from 1 to 4294967294"},
    {"MissingRoutePort", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0"}])"); }, "$.routes[0].port",
     "missing required key, expected the name of the port the route leaves through"},
    {"MissingRoutePrefix", [](json& j) { j["routes"] = J(R"([{"port": "out"}])"); }, "$.routes[0].prefix",
     "missing required key, expected an IPv4 or IPv6 prefix like 0.0.0.0/0 or ::/0"},
    {"MissingNeighborMac", [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.9"}])"); },
     "$.neighbors[0].mac", "missing required key, expected a MAC address like 02:00:00:00:00:fe"},
    {"MissingNeighborIp", [](json& j) { j["neighbors"] = J(R"([{"port": "out", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip", "missing required key, expected an IPv4 or IPv6 address like 192.0.2.254 or 2001:db8::fe"},
    {"MissingNeighborPort", [](json& j) { j["neighbors"] = J(R"([{"ip": "192.0.2.9", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].port", "missing required key, expected a port name"},

    // --- EAL and workers ---------------------------------------------------------------------
    {"LcoresOpenRange", [](json& j) { j["eal"]["lcores"] = "0-"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0-\""},
    {"LcoresReversed", [](json& j) { j["eal"]["lcores"] = "3-1"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"3-1\""},
    {"LcoresWords", [](json& j) { j["eal"]["lcores"] = "all"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"all\""},
    {"LcoresEmpty", [](json& j) { j["eal"]["lcores"] = ""; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"\""},
    {"LcoresBeyondMax", [](json& j) { j["eal"]["lcores"] = "0-128"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0-128\""},
    {"LcoresMappedEmptyCpus", [](json& j) { j["eal"]["lcores"] = "0@0,1@"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0,1@\""},
    {"LcoresMappedUnbalanced", [](json& j) { j["eal"]["lcores"] = "(0-1@0"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"(0-1@0\""},
    {"LcoresMappedNested", [](json& j) { j["eal"]["lcores"] = "((0))@0"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"((0))@0\""},
    {"LcoresMappedLcoreBeyondMax", [](json& j) { j["eal"]["lcores"] = "0@0,128@1"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0,128@1\""},
    {"LcoresMappedCpuBeyondMax", [](json& j) { j["eal"]["lcores"] = "0@0,1@1024"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0,1@1024\""},
    {"LcoresMappedReversed", [](json& j) { j["eal"]["lcores"] = "0@0,(3-1)@2"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0,(3-1)@2\""},
    {"LcoresMappedEmptyItem", [](json& j) { j["eal"]["lcores"] = "0@0,,1@1"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0,,1@1\""},
    {"LcoresMappedTwoAts", [](json& j) { j["eal"]["lcores"] = "0@0@1"; }, "$.eal.lcores",
     "expected an lcore list like \"0-3\", \"0,2,4\" or \"0-1,4\" (ids 0 to 127), or EAL's mapping form like \"0@0,(1-2)@(4-5)\" (CPUs 0 to 1023), got \"0@0@1\""},
    {"MappedMainNotInLcores", [](json& j) { j["eal"]["lcores"] = "1@0,2@1"; j["workers"] = {2}; }, "$.eal.lcores",
     "expected the main lcore to be one of the lcores \"1@0,2@1\", got 0"},
    {"MappedWorkerNotInLcores", [](json& j) { j["eal"]["lcores"] = "0@0,(1-2)@(4-5)"; j["workers"] = {1, 3}; },
     "$.workers[1]", "expected one of the lcores \"0@0,(1-2)@(4-5)\" ($.eal.lcores: 0,1,2), got 3"},
    {"MainNotInLcores", [](json& j) { j["eal"]["main_lcore"] = 2; }, "$.eal.main_lcore",
     "expected the main lcore to be one of the lcores \"0-1\", got 2"},
    {"DefaultMainNotInLcores", [](json& j) { j["eal"]["lcores"] = "1-2"; }, "$.eal.lcores",
     "expected the main lcore to be one of the lcores \"1-2\", got 0"},
    {"WorkerIsMain", [](json& j) { j["workers"] = {0}; }, "$.workers[0]",
     "expected a worker lcore other than the main lcore 0 ($.eal.main_lcore), got 0"},
    {"WorkerNotInLcores", [](json& j) { j["eal"]["lcores"] = "0-1,4"; j["workers"] = {1, 3}; }, "$.workers[1]",
     "expected one of the lcores \"0-1,4\" ($.eal.lcores: 0,1,4), got 3"},
    {"WorkerDuplicate", [](json& j) { j["eal"]["lcores"] = "0-3"; j["workers"] = {1, 2, 1}; }, "$.workers[2]",
     "expected each worker lcore once, got 1 twice"},
    {"WorkerTooBig", [](json& j) { j["eal"]["lcores"] = "0@0,1@1"; j["workers"] = {1000}; }, "$.workers[0]",
     "expected an integer from 0 to 127, got 1000"},
    {"FilePrefixWithSlash", [](json& j) { j["eal"]["file_prefix"] = "../egw"; }, "$.eal.file_prefix",
     "expected a file prefix of 1 to 64 characters from [A-Za-z0-9._-], got \"../egw\""},
    {"VdevEmptyName", [](json& j) { j["eal"]["vdevs"][1] = ",iface=x"; }, "$.eal.vdevs[1]",
     "expected a virtual device specification like \"net_tap0,iface=egw0\", got \",iface=x\""},
    {"VdevEmptyString", [](json& j) { j["eal"]["vdevs"][1] = ""; }, "$.eal.vdevs[1]",
     "expected virtual device specifications like \"net_tap0,iface=egw0\", got \"\""},
    {"VdevDuplicate", [](json& j) { j["eal"]["vdevs"][2] = "net_tap0,iface=other"; }, "$.eal.vdevs[2]",
     "expected each virtual device name once, got \"net_tap0\" twice"},
    {"PciBad", [](json& j) { j["eal"]["pci_allow"] = {"0000:01:00"}; }, "$.eal.pci_allow[0]",
     "expected a PCI address like \"0000:01:00.0\" (optionally followed by \",devargs\"), got \"0000:01:00\""},
    {"PciBadFunction", [](json& j) { j["eal"]["pci_allow"] = {"0000:01:00.8"}; }, "$.eal.pci_allow[0]",
     "expected a PCI address like \"0000:01:00.0\" (optionally followed by \",devargs\"), got \"0000:01:00.8\""},
    {"PciDuplicate", [](json& j) { j["eal"]["pci_allow"] = {"0000:01:00.0", "01:00.0,x=1"}; }, "$.eal.pci_allow[1]",
     "expected each PCI address once, got \"0000:01:00.0\" twice"},

    // --- ports -------------------------------------------------------------------------------
    {"PortNameWithSpace", [](json& j) { j["ports"][0]["name"] = "my port"; }, "$.ports[0].name",
     "expected a port name of 1 to 32 characters from [A-Za-z0-9._-], got \"my port\""},
    {"PortNameEmpty", [](json& j) { j["ports"][0]["name"] = ""; }, "$.ports[0].name",
     "expected a port name of 1 to 32 characters from [A-Za-z0-9._-], got \"\""},
    {"PortNameDuplicate", [](json& j) { j["ports"][2]["name"] = "in"; }, "$.ports[2].name",
     "expected each port name once, got \"in\" twice"},
    {"PortDeviceDuplicate", [](json& j) { j["ports"][2]["device"] = "net_tap0"; }, "$.ports[2].device",
     "expected each device in one port only, got \"net_tap0\" twice"},
    {"PortPciDeviceDuplicate",
     [](json& j) {
         j["eal"]["pci_allow"] = {"0000:01:00.0"};
         j["ports"][1]["device"] = "0000:01:00.0";
         j["ports"][2]["device"] = "01:00.0";
     },
     "$.ports[2].device", "expected each device in one port only, got \"01:00.0\" twice"},
    {"PortDeviceNotDeclared", [](json& j) { j["ports"][1]["device"] = "net_tap7"; }, "$.ports[1].device",
     "expected a device declared in $.eal.vdevs (like \"net_af_packet0\") or a PCI address, got \"net_tap7\""},
    {"PortPciNotAllowed", [](json& j) { j["eal"]["pci_allow"] = {"0000:01:00.0"}; j["ports"][1]["device"] = "0000:01:00.1"; },
     "$.ports[1].device", "expected a PCI device listed in $.eal.pci_allow, got \"0000:01:00.1\""},
    {"PortPciWithVdevsOnly", [](json& j) { j["ports"][1]["device"] = "0000:01:00.1"; }, "$.ports[1].device",
     "expected a PCI device listed in $.eal.pci_allow, got \"0000:01:00.1\""},
    {"PortPciNoAllowListAtAll",
     [](json& j) {
         j["eal"] = json::object();
         j["ports"][0]["device"] = "0000:01:00.0";
     },
     "$.ports[0].device", "expected a PCI device listed in $.eal.pci_allow, got \"0000:01:00.0\""},
    {"PortDeviceEmpty", [](json& j) { j["ports"][1]["device"] = ""; }, "$.ports[1].device",
     "expected a DPDK device name like \"net_af_packet0\" or \"0000:01:00.0\" (or \"parent\" and \"vlan\" for a "
     "VLAN), got \"\""},
    {"PortBadRole", [](json& j) { j["ports"][1]["role"] = "external"; }, "$.ports[1].role",
     "expected \"inside\" or \"outside\", got \"external\""},
    {"PortUnknownVrf", [](json& j) { j["ports"][1]["vrf"] = "red"; }, "$.ports[1].vrf",
     "expected a VRF declared in $.vrfs (\"default\", \"blue\"), got \"red\""},
    {"PortVrfByTableNumber", [](json& j) { j["ports"][1]["vrf"] = "100"; }, "$.ports[1].vrf",
     "expected a VRF declared in $.vrfs (\"default\", \"blue\"), got \"100\""},
    {"NoOutsidePort",
     [](json& j) {
         j["ports"][1]["role"] = "inside";
         j["ports"][2]["role"] = "inside";
     },
     "$.ports", "expected at least one port with role \"outside\", got none"},
    {"NoInsidePort", [](json& j) { j["ports"][0]["role"] = "outside"; }, "$.ports",
     "expected at least one port with role \"inside\", got none"},
    {"NinthIpv4AddressOnAPort",
     [](json& j) {
         for (int i = 0; i < 8; ++i)
             j["ports"][0]["addresses"].push_back("10.250." + std::to_string(i) + ".1/24");
     },
     "$.ports[0].addresses[8]", "expected at most 8 IPv4 addresses on a port, got 10.250.7.1 as one more"},
    {"NinthIpv6AddressOnAPort",
     [](json& j) {
         for (int i = 0; i < 9; ++i)
             j["ports"][0]["addresses"].push_back("fd00:250:" + std::to_string(i) + "::1/64");
     },
     "$.ports[0].addresses[9]", "expected at most 8 IPv6 addresses on a port, got fd00:250:8::1 as one more"},
    {"AddressOctetTooBig", [](json& j) { j["ports"][0]["addresses"][0] = "10.0.0.300/24"; }, "$.ports[0].addresses[0]",
     "expected an IPv4 or IPv6 prefix like 10.0.0.1/24 or 2001:db8::1/64, got \"10.0.0.300/24\""},
    {"AddressWithoutLength", [](json& j) { j["ports"][0]["addresses"][0] = "10.244.1.1"; }, "$.ports[0].addresses[0]",
     "expected an IPv4 or IPv6 prefix like 10.0.0.1/24 or 2001:db8::1/64, got \"10.244.1.1\""},
    {"AddressLengthZero", [](json& j) { j["ports"][0]["addresses"][0] = "10.244.1.1/0"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 32, like 10.0.0.1/24, got \"10.244.1.1/0\""},
    {"AddressMulticast", [](json& j) { j["ports"][0]["addresses"][0] = "224.0.0.1/24"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 32, like 10.0.0.1/24, got \"224.0.0.1/24\""},
    {"AddressLoopback", [](json& j) { j["ports"][0]["addresses"][0] = "127.0.0.1/8"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 32, like 10.0.0.1/24, got \"127.0.0.1/8\""},
    {"Address6LengthTooBig", [](json& j) { j["ports"][0]["addresses"][0] = "fd00::1/129"; }, "$.ports[0].addresses[0]",
     "expected an IPv4 or IPv6 prefix like 10.0.0.1/24 or 2001:db8::1/64, got \"fd00::1/129\""},
    {"Address6LengthZero", [](json& j) { j["ports"][0]["addresses"][0] = "fd00::1/0"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 128, like 2001:db8::1/64, got \"fd00::1/0\""},
    {"Address6Multicast", [](json& j) { j["ports"][0]["addresses"][0] = "ff02::1/64"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 128, like 2001:db8::1/64, got \"ff02::1/64\""},
    {"Address6Loopback", [](json& j) { j["ports"][0]["addresses"][0] = "::1/128"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 128, like 2001:db8::1/64, got \"::1/128\""},
    {"Address6Unspecified", [](json& j) { j["ports"][0]["addresses"][0] = "::/64"; }, "$.ports[0].addresses[0]",
     "expected a unicast interface address with a prefix length from 1 to 128, like 2001:db8::1/64, got \"::/64\""},
    {"Address6LinkLocal", [](json& j) { j["ports"][0]["addresses"][0] = "fe80::1/64"; }, "$.ports[0].addresses[0]",
     "expected a global or unique-local IPv6 address like 2001:db8::1/64 (link-local addresses are not configured), got "
     "\"fe80::1/64\""},
    {"Address6Mapped", [](json& j) { j["ports"][0]["addresses"][0] = "::ffff:10.244.1.1/120"; }, "$.ports[0].addresses[0]",
     "expected an IPv4 prefix written as IPv4, got \"::ffff:10.244.1.1/120\" (an IPv4-mapped IPv6 prefix)"},
    {"Address6Zone", [](json& j) { j["ports"][0]["addresses"][0] = "fd00::1%eth0/64"; }, "$.ports[0].addresses[0]",
     "expected an IPv4 or IPv6 prefix like 10.0.0.1/24 or 2001:db8::1/64, got \"fd00::1%eth0/64\""},
    {"Address6DuplicateInPort", [](json& j) { j["ports"][0]["addresses"] = {"fd00::1/64", "fd00:0::1/56"}; },
     "$.ports[0].addresses[1]", "expected each address once, got fd00::1 twice"},
    {"Address6DuplicateInVrf",
     [](json& j) {
         j["ports"][0]["addresses"].push_back("fd00:10:244::1/64");
         j["ports"][1]["addresses"].push_back("FD00:10:244:0::1/64");
     },
     "$.ports[1].addresses[1]", "expected an address unique in VRF \"default\", got fd00:10:244::1 which port \"in\" already has"},
    {"AddressDuplicateInPort", [](json& j) { j["ports"][0]["addresses"] = {"10.244.1.1/24", "10.244.1.1/16"}; },
     "$.ports[0].addresses[1]", "expected each address once, got 10.244.1.1 twice"},
    {"AddressDuplicateInVrf", [](json& j) { j["ports"][1]["addresses"] = {"10.244.1.1/24"}; }, "$.ports[1].addresses[0]",
     "expected an address unique in VRF \"default\", got 10.244.1.1 which port \"in\" already has"},
    {"MacBad", [](json& j) { j["ports"][0]["mac"] = "02:00:00:00:00"; }, "$.ports[0].mac",
     "expected a MAC address like 02:00:00:00:00:01, got \"02:00:00:00:00\""},
    {"MacMulticast", [](json& j) { j["ports"][0]["mac"] = "01:00:5e:00:00:01"; }, "$.ports[0].mac",
     "expected a unicast MAC address (not zero, lowest bit of the first byte clear), got \"01:00:5e:00:00:01\""},
    {"MacBroadcast", [](json& j) { j["ports"][0]["mac"] = "ff:ff:ff:ff:ff:ff"; }, "$.ports[0].mac",
     "expected a unicast MAC address (not zero, lowest bit of the first byte clear), got \"ff:ff:ff:ff:ff:ff\""},
    {"MacZero", [](json& j) { j["ports"][0]["mac"] = "00:00:00:00:00:00"; }, "$.ports[0].mac",
     "expected a unicast MAC address (not zero, lowest bit of the first byte clear), got \"00:00:00:00:00:00\""},

    // --- neighbours --------------------------------------------------------------------------
    {"NeighborUnknownPort",
     [](json& j) { j["neighbors"] = J(R"([{"port": "ext9", "ip": "192.0.2.9", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].port", "expected a port declared in $.ports (\"in\", \"out\", \"blue1\"), got \"ext9\""},
    {"NeighborBadIp",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip", "expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1, got \"192.0.2\""},
    {"NeighborNotOnLink",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.3.9", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip",
     "expected a neighbour address on-link on port \"out\" (its addresses are 192.0.2.1/24), got 192.0.3.9"},
    {"NeighborIsOwnAddress",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.1", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip", "expected a neighbour address other than port \"out\"'s own address, got 192.0.2.1"},
    {"NeighborDuplicate",
     [](json& j) {
         j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.9", "mac": "02:00:00:00:00:09"},
                                {"port": "out", "ip": "192.0.2.9", "mac": "02:00:00:00:00:0a"}])");
     },
     "$.neighbors[1].ip", "expected each neighbour once per port, got 192.0.2.9 on port \"out\" twice"},
    {"Neighbor6NotOnLink",
     [](json& j) {
         j["ports"][1]["addresses"].push_back("2001:db8:1::1/64");
         j["neighbors"] = J(R"([{"port": "out", "ip": "2001:db8:2::9", "mac": "02:00:00:00:00:09"}])");
     },
     "$.neighbors[0].ip",
     "expected a neighbour address on-link on port \"out\" (its addresses are 192.0.2.1/24, 2001:db8:1::1/64), got "
     "2001:db8:2::9"},
    {"Neighbor6IsOwnAddress",
     [](json& j) {
         j["ports"][1]["addresses"].push_back("2001:db8:1::1/64");
         j["neighbors"] = J(R"([{"port": "out", "ip": "2001:db8:1:0::1", "mac": "02:00:00:00:00:09"}])");
     },
     "$.neighbors[0].ip", "expected a neighbour address other than port \"out\"'s own address, got 2001:db8:1::1"},
    {"Neighbor6Multicast",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "ff02::1", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip", "expected a neighbour address that is a unicast address, got ff02::1"},
    {"Neighbor6Duplicate",
     [](json& j) {
         j["neighbors"] = J(R"([{"port": "out", "ip": "fe80::9", "mac": "02:00:00:00:00:09"},
                                {"port": "out", "ip": "fe80:0::9", "mac": "02:00:00:00:00:0a"}])");
     },
     "$.neighbors[1].ip", "expected each neighbour once per port, got fe80::9 on port \"out\" twice"},
    {"NeighborMapped",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "::ffff:192.0.2.9", "mac": "02:00:00:00:00:09"}])"); },
     "$.neighbors[0].ip", "expected an IPv4 address written as IPv4, got \"::ffff:192.0.2.9\" (an IPv4-mapped IPv6 address)"},
    {"NeighborMulticastMac",
     [](json& j) { j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.9", "mac": "03:00:00:00:00:09"}])"); },
     "$.neighbors[0].mac",
     "expected a unicast MAC address (not zero, lowest bit of the first byte clear), got \"03:00:00:00:00:09\""},
    {"NeighborPortWithoutAddress",
     [](json& j) {
         j["ports"][1].erase("addresses");
         j["neighbors"] = J(R"([{"port": "out", "ip": "192.0.2.9", "mac": "02:00:00:00:00:09"}])");
     },
     "$.neighbors[0].ip", "expected a neighbour address on-link on port \"out\" (it has no addresses), got 192.0.2.9"},

    // --- VRFs --------------------------------------------------------------------------------
    {"DefaultVrfOtherTable", [](json& j) { j["vrfs"].push_back(J(R"({"name": "default", "table": 100})")); },
     "$.vrfs[1].table", "expected table 254 for the VRF \"default\" (Linux's main table), got 100"},
    {"DefaultVrfTwice", [](json& j) { j["vrfs"] = J(R"([{"name": "default"}, {"name": "default", "table": 254}])"); },
     "$.vrfs[1].name", "expected each VRF name once, got \"default\" twice"},
    {"VrfNameDuplicate", [](json& j) { j["vrfs"].push_back(J(R"({"name": "blue", "table": 200})")); }, "$.vrfs[1].name",
     "expected each VRF name once, got \"blue\" twice"},
    {"VrfTableDuplicate", [](json& j) { j["vrfs"].push_back(J(R"({"name": "red", "table": 100})")); }, "$.vrfs[1].table",
     "expected each table number once, got 100, already used by VRF \"blue\""},
    {"VrfTableOfDefault", [](json& j) { j["vrfs"][0]["table"] = 254; }, "$.vrfs[0].table",
     "expected each table number once, got 254, already used by VRF \"default\""},
    {"VrfNameEmpty", [](json& j) { j["vrfs"][0]["name"] = ""; }, "$.vrfs[0].name",
     "expected a VRF name like \"blue\", got \"\""},
    {"VrfNameSpace", [](json& j) { j["vrfs"][0]["name"] = "my vrf"; }, "$.vrfs[0].name",
     "expected a VRF name without spaces, control characters or '/', got \"my vrf\""},
    {"VrfNameSlash", [](json& j) { j["vrfs"][0]["name"] = "a/b"; }, "$.vrfs[0].name",
     "expected a VRF name without spaces, control characters or '/', got \"a/b\""},
    {"VrfNameNumeric", [](json& j) { j["vrfs"][0]["name"] = "100"; }, "$.vrfs[0].name",
     "expected a VRF name that is not a number (numbers refer to tables), got \"100\""},
    {"VrfNameTooLong", [](json& j) { j["vrfs"][0]["name"] = std::string(64, 'v'); }, "$.vrfs[0].name",
     "expected a VRF name of at most 63 characters, got \"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\""},
    {"VrfNotObject", [](json& j) { j["vrfs"][0] = "blue"; }, "$.vrfs[0]",
     "expected a VRF like {\"name\": \"blue\", \"table\": 100}, got \"blue\""},

    // --- routes ------------------------------------------------------------------------------
    {"RouteUnknownVrf", [](json& j) { j["routes"] = J(R"([{"vrf": "red", "prefix": "0.0.0.0/0", "port": "out"}])"); },
     "$.routes[0].vrf", "expected a VRF declared in $.vrfs (\"default\", \"blue\"), got \"red\""},
    {"RouteUnknownPort", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "port": "ext"}])"); },
     "$.routes[0].port", "expected a port declared in $.ports (\"in\", \"out\", \"blue1\"), got \"ext\""},
    {"RouteHostBits", [](json& j) { j["routes"] = J(R"([{"prefix": "10.0.0.1/8", "port": "out"}])"); },
     "$.routes[0].prefix", "expected a prefix without host bits, got \"10.0.0.1/8\" (did you mean \"10.0.0.0/8\"?)"},
    {"RouteBadPrefix", [](json& j) { j["routes"] = J(R"([{"prefix": "default", "port": "out"}])"); },
     "$.routes[0].prefix", "expected an IPv4 or IPv6 prefix like 10.0.0.0/16 or 2001:db8::/64, got \"default\""},
    {"RoutePortInOtherVrf", [](json& j) { j["routes"] = J(R"([{"vrf": "blue", "prefix": "0.0.0.0/0", "port": "out"}])"); },
     "$.routes[0].port", "expected a port in VRF \"blue\", got \"out\" which is in VRF \"default\""},
    {"RouteDefaultVrfPortInBlue", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "port": "blue1"}])"); },
     "$.routes[0].port", "expected a port in VRF \"default\", got \"blue1\" which is in VRF \"blue\""},
    {"RouteViaNotOnLink",
     [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": "198.51.100.254", "port": "out"}])"); },
     "$.routes[0].via", "expected a next hop on-link on port \"out\" (its addresses are 192.0.2.1/24), got 198.51.100.254"},
    {"RouteViaOwnAddress", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": "192.0.2.1", "port": "out"}])"); },
     "$.routes[0].via", "expected a next hop other than port \"out\"'s own address, got 192.0.2.1"},
    {"RouteViaBad", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": "192.0.2.0254", "port": "out"}])"); },
     "$.routes[0].via", "expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1, got \"192.0.2.0254\""},
    {"RouteViaNumber", [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": 3221225982, "port": "out"}])"); },
     "$.routes[0].via", "expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1, got 3221225982"},
    {"Route6HostBits", [](json& j) { j["routes"] = J(R"([{"prefix": "2001:db8:0:1::/48", "port": "out"}])"); },
     "$.routes[0].prefix",
     "expected a prefix without host bits, got \"2001:db8:0:1::/48\" (did you mean \"2001:db8::/48\"?)"},
    {"Route6ViaOtherFamily",
     [](json& j) { j["routes"] = J(R"([{"prefix": "::/0", "via": "192.0.2.254", "port": "out"}])"); },
     "$.routes[0].via", "expected a next hop of the prefix's family (IPv6), got \"192.0.2.254\""},
    {"RouteViaIpv6ForIpv4",
     [](json& j) { j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": "fe80::1", "port": "out"}])"); },
     "$.routes[0].via", "expected a next hop of the prefix's family (IPv4), got \"fe80::1\""},
    {"Route6ViaNotOnLink",
     [](json& j) {
         j["ports"][1]["addresses"].push_back("2001:db8:1::1/64");
         j["routes"] = J(R"([{"prefix": "::/0", "via": "2001:db8:99::1", "port": "out"}])");
     },
     "$.routes[0].via",
     "expected a next hop on-link on port \"out\" (its addresses are 192.0.2.1/24, 2001:db8:1::1/64), got 2001:db8:99::1"},
    {"Route6Duplicate",
     [](json& j) {
         j["routes"] = json::parse(R"([{"prefix": "::/0", "via": "fe80::1", "port": "out"},
                             {"prefix": "0:0::/0", "via": "fe80::2", "port": "out"}])");
     },
     "$.routes[1].prefix", "expected each prefix once per VRF, got ::/0 twice in VRF \"default\""},
    {"RouteDuplicate",
     [](json& j) {
         j["routes"] = J(R"([{"prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "out"},
                             {"vrf": "blue", "prefix": "0.0.0.0/0", "port": "blue1"},
                             {"vrf": "default", "prefix": "0.0.0.0/0", "via": "192.0.2.253", "port": "out"}])");
     },
     "$.routes[2].prefix", "expected each prefix once per VRF, got 0.0.0.0/0 twice in VRF \"default\""},

    // --- cluster, default action -------------------------------------------------------------
    {"PodCidrHostBits", [](json& j) { j["cluster"]["pod_cidrs"] = {"10.244.1.1/16"}; }, "$.cluster.pod_cidrs[0]",
     "expected a prefix without host bits, got \"10.244.1.1/16\" (did you mean \"10.244.0.0/16\"?)"},
    {"PodCidrDuplicate", [](json& j) { j["cluster"]["pod_cidrs"] = {"10.244.0.0/16", "10.244.0.0/16"}; },
     "$.cluster.pod_cidrs[1]", "expected each prefix once, got 10.244.0.0/16 twice"},
    {"ServiceCidrBad", [](json& j) { j["cluster"]["service_cidrs"] = {"10.96.0.0/40"}; }, "$.cluster.service_cidrs[0]",
     "expected an IPv4 or IPv6 prefix like 10.0.0.0/16 or 2001:db8::/64, got \"10.96.0.0/40\""},
    {"NodeIpBad", [](json& j) { j["cluster"]["node_ips"] = {"172.18.0.2", "172.18.0"}; }, "$.cluster.node_ips[1]",
     "expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1, got \"172.18.0\""},
    {"PodCidr6HostBits", [](json& j) { j["cluster"]["pod_cidrs"] = {"10.244.0.0/16", "fd00:10:244::1/56"}; },
     "$.cluster.pod_cidrs[1]",
     "expected a prefix without host bits, got \"fd00:10:244::1/56\" (did you mean \"fd00:10:244::/56\"?)"},
    {"PodCidr6Duplicate", [](json& j) { j["cluster"]["pod_cidrs"] = {"fd00:10:244::/56", "fd00:10:244:0::/56"}; },
     "$.cluster.pod_cidrs[1]", "expected each prefix once, got fd00:10:244::/56 twice"},
    {"NodeIp6Duplicate", [](json& j) { j["cluster"]["node_ips"] = {"fc00::2", "FC00:0::2"}; }, "$.cluster.node_ips[1]",
     "expected each node IP once, got fc00::2 twice"},
    {"NodeIpDuplicate", [](json& j) { j["cluster"]["node_ips"] = {"172.18.0.2", "172.18.0.2"}; }, "$.cluster.node_ips[1]",
     "expected each node IP once, got 172.18.0.2 twice"},
    {"DefaultActionUnknown", [](json& j) { j["default_action"] = "snat"; }, "$.default_action",
     "expected \"route\", \"masquerade\" or \"drop\", got \"snat\""},
    {"DefaultActionCase", [](json& j) { j["default_action"] = "Drop"; }, "$.default_action",
     "expected \"route\", \"masquerade\" or \"drop\", got \"Drop\""},
    {"PolicyUnknownKey", [](json& j) { j["policy"] = {{"egress_firewalls", "off"}}; }, "$.policy.egress_firewalls",
     "unknown key \"egress_firewalls\", expected one of: egress_firewall, egress_firewall_reject, dns_servers"},
    {"EgressFirewallMode", [](json& j) { j["policy"] = {{"egress_firewall", "on"}}; }, "$.policy.egress_firewall",
     "expected \"enforce\" or \"off\", got \"on\""},
    {"EgressFirewallReject", [](json& j) { j["policy"] = {{"egress_firewall_reject", "reject"}}; },
     "$.policy.egress_firewall_reject", "expected \"drop\" or \"icmp\", got \"reject\""},

    // --- node --------------------------------------------------------------------------------
    {"NodeNameUpperCase", [](json& j) { j["node"]["name"] = "GW-1"; }, "$.node.name",
     "expected a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253) like "
     "\"gw-1\", got \"GW-1\""},
    {"NodeNameLeadingDash", [](json& j) { j["node"]["name"] = "-gw"; }, "$.node.name",
     "expected a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253) like "
     "\"gw-1\", got \"-gw\""},
    {"NodeNameEmptyLabel", [](json& j) { j["node"]["name"] = "gw..example"; }, "$.node.name",
     "expected a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253) like "
     "\"gw-1\", got \"gw..example\""},
    {"NodeNameTooLong", [](json& j) { j["node"]["name"] = std::string(254, 'a'); }, "$.node.name",
     "expected a node name that is a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253) like "
     "\"gw-1\", got \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"..."},
    {"LabelKeyBad", [](json& j) { j["node"]["labels"]["-bad"] = "x"; }, "$.node.labels[\"-bad\"]",
     "expected a Kubernetes label key like \"example.com/role\" (optional DNS prefix, name of at most 63 characters "
     "from [A-Za-z0-9._-]), got \"-bad\""},
    {"LabelKeyBadPrefix", [](json& j) { j["node"]["labels"]["Example.com/x"] = "x"; }, "$.node.labels[\"Example.com/x\"]",
     "expected a Kubernetes label key like \"example.com/role\" (optional DNS prefix, name of at most 63 characters "
     "from [A-Za-z0-9._-]), got \"Example.com/x\""},
    {"LabelValueSpace", [](json& j) { j["node"]["labels"]["zone"] = "a b"; }, "$.node.labels.zone",
     "expected a label value of at most 63 characters from [A-Za-z0-9._-], alphanumeric at both ends, got \"a b\""},
    {"LabelValueTooLong", [](json& j) { j["node"]["labels"]["zone"] = std::string(64, 'z'); }, "$.node.labels.zone",
     "expected a label value of at most 63 characters from [A-Za-z0-9._-], alphanumeric at both ends, got "
     "\"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\""},

    // --- state -------------------------------------------------------------------------------
    {"StateSourceUnknown", [](json& j) { j["state"]["source"] = "etcd"; }, "$.state.source",
     "expected \"files\" or \"kubernetes\", got \"etcd\""},
    {"StatePathEmpty", [](json& j) { j["state"]["path"] = ""; }, "$.state.path",
     "expected the manifest directory, relative to the configuration file's directory, like \"manifests\", got \"\""},
    {"StatePathNumber", [](json& j) { j["state"]["path"] = 7; }, "$.state.path",
     "expected the manifest directory, relative to the configuration file's directory, like \"manifests\", got 7"},
    {"StateKubeconfigWithFiles", [](json& j) { j["state"]["kubeconfig"] = "/root/.kube/config"; }, "$.state.kubeconfig",
     "expected no kubeconfig with source \"files\" (it is only read with source \"kubernetes\"), got "
     "\"/root/.kube/config\""},
    {"StatePathWithKubernetes", [](json& j) { j["state"]["source"] = "kubernetes"; }, "$.state.path",
     "expected no path with source \"kubernetes\" (it is only read with source \"files\"), got \"manifests\""},
    {"StateKubeconfigWithFilesBadType", [](json& j) { j["state"]["kubeconfig"] = false; }, "$.state.kubeconfig",
     "expected a kubeconfig path, or \"\" for in-cluster credentials, got false"},
    {"StatePollWithKubernetesChecked", [](json& j) { j["state"] = J(R"({"source": "kubernetes", "poll_ms": 0})"); },
     "$.state.poll_ms", "expected an integer from 10 to 60000, got 0"},
    {"StateKubeconfigNumber", [](json& j) { j["state"] = J(R"({"source": "kubernetes", "kubeconfig": 1})"); },
     "$.state.kubeconfig", "expected a kubeconfig path, or \"\" for in-cluster credentials, got 1"},

    // --- metrics -------------------------------------------------------------------------------
    {"MetricsNotObject", [](json& j) { j["metrics"] = true; }, "$.metrics",
     "expected an object like {\"listen\": \"127.0.0.1:9469\"}, got true"},
    {"UnknownMetrics", [](json& j) { j["metrics"] = {{"port", 9469}}; }, "$.metrics.port",
     "unknown key \"port\", expected one of: enabled, listen"},
    {"MetricsEnabledNotBool", [](json& j) { j["metrics"] = {{"enabled", "yes"}}; }, "$.metrics.enabled",
     "expected true or false, got \"yes\""},
    {"MetricsListenNotString", [](json& j) { j["metrics"] = {{"listen", 9469}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got 9469"},
    {"MetricsListenNoPort", [](json& j) { j["metrics"] = {{"listen", "127.0.0.1"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got \"127.0.0.1\""},
    {"MetricsListenHostName", [](json& j) { j["metrics"] = {{"listen", "localhost:9469"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got "
     "\"localhost:9469\""},
    {"MetricsListenPortZero", [](json& j) { j["metrics"] = {{"listen", "0.0.0.0:0"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got \"0.0.0.0:0\""},
    {"MetricsListenPortTooLarge", [](json& j) { j["metrics"] = {{"listen", "0.0.0.0:65536"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got "
     "\"0.0.0.0:65536\""},
    {"MetricsListenBadIpv6", [](json& j) { j["metrics"] = {{"listen", "[::g]:9469"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got "
     "\"[::g]:9469\""},
    {"MetricsListenIpv6NoBrackets", [](json& j) { j["metrics"] = {{"listen", "::1:9469"}}; }, "$.metrics.listen",
     "expected an IP address and a TCP port like \"127.0.0.1:9469\", \"0.0.0.0:9469\" or \"[::]:9469\", got "
     "\"::1:9469\""},

    // --- egress_ip -----------------------------------------------------------------------------
    {"EgressIPNotObject", [](json& j) { j["egress_ip"] = 3; }, "$.egress_ip",
     "expected an object like {\"capacity\": 10}, got 3"},
    {"UnknownEgressIP", [](json& j) { j["egress_ip"] = {{"max", 3}}; }, "$.egress_ip.max",
     "unknown key \"max\", expected one of: capacity"},
    {"EgressIPCapacityNegative", [](json& j) { j["egress_ip"] = {{"capacity", -1}}; }, "$.egress_ip.capacity",
     "expected an integer from 0 to 1000000, got -1"},
    {"EgressIPCapacityText", [](json& j) { j["egress_ip"] = {{"capacity", "10"}}; }, "$.egress_ip.capacity",
     "expected an integer from 0 to 1000000, got \"10\""},
    {"EgressIPCapacityTooLarge", [](json& j) { j["egress_ip"] = {{"capacity", 1000001}}; }, "$.egress_ip.capacity",
     "expected an integer from 0 to 1000000, got 1000001"},

    // --- sync ----------------------------------------------------------------------------------
    {"SyncNotObject", [](json& j) { j["sync"] = 1; }, "$.sync",
     "expected an object like {\"id\": 1, \"listen\": \"10.0.0.1:7470\", \"key_file\": \"sync.key\", \"peers\": "
     "[{\"id\": 2, \"address\": \"10.0.0.2:7470\"}]}, got 1"},
    {"UnknownSync", [](json& j) { j["sync"] = sync_section(); j["sync"]["port"] = 1; }, "$.sync.port",
     "unknown key \"port\", expected one of: id, listen, key_file, peers, mtu, standby_max_sessions"},
    {"SyncIdMissing", [](json& j) { j["sync"] = sync_section(); j["sync"].erase("id"); }, "$.sync.id",
     "missing required key, expected an integer from 1 to 4294967295"},
    {"SyncIdZero", [](json& j) { j["sync"] = sync_section(); j["sync"]["id"] = 0; }, "$.sync.id",
     "expected an integer from 1 to 4294967295, got 0"},
    {"SyncIdTooLarge", [](json& j) { j["sync"] = sync_section(); j["sync"]["id"] = 4294967296; }, "$.sync.id",
     "expected an integer from 1 to 4294967295, got 4294967296"},
    {"SyncListenMissing", [](json& j) { j["sync"] = sync_section(); j["sync"].erase("listen"); }, "$.sync.listen",
     "missing required key, expected an IP address and a UDP port like \"10.0.0.1:7470\" or \"[fd00::1]:7470\""},
    {"SyncListenHostName", [](json& j) { j["sync"] = sync_section(); j["sync"]["listen"] = "gw-1:7470"; },
     "$.sync.listen",
     "expected an IP address and a UDP port like \"10.0.0.1:7470\" or \"[fd00::1]:7470\", got \"gw-1:7470\""},
    {"SyncKeyFileMissing", [](json& j) { j["sync"] = sync_section(); j["sync"].erase("key_file"); }, "$.sync.key_file",
     "missing required key, expected the file of the key shared by the gateways, relative to the configuration "
     "file's directory, like \"sync.key\""},
    {"SyncKeyFileEmpty", [](json& j) { j["sync"] = sync_section(); j["sync"]["key_file"] = ""; }, "$.sync.key_file",
     "expected the file of the key shared by the gateways, relative to the configuration file's directory, like "
     "\"sync.key\", got \"\""},
    {"SyncMtuTooSmall", [](json& j) { j["sync"] = sync_section(); j["sync"]["mtu"] = 575; }, "$.sync.mtu",
     "expected an integer from 576 to 65535, got 575"},
    {"SyncStandbyBoundZero",
     [](json& j) {
         j["sync"] = sync_section();
         j["sync"]["standby_max_sessions"] = 0;
     },
     "$.sync.standby_max_sessions", "expected an integer from 1 to 100000000, got 0"},
    {"SyncPeersMissing", [](json& j) { j["sync"] = sync_section(); j["sync"].erase("peers"); }, "$.sync.peers",
     "missing required key, expected an array of the other gateways like [{\"id\": 2, \"address\": "
     "\"10.0.0.2:7470\"}]"},
    {"SyncPeersEmpty", [](json& j) { j["sync"] = sync_section(); j["sync"]["peers"] = json::array(); },
     "$.sync.peers",
     "expected an array of the other gateways like [{\"id\": 2, \"address\": \"10.0.0.2:7470\"}], got an empty "
     "array"},
    {"UnknownSyncPeer", [](json& j) { j["sync"] = sync_section(); j["sync"]["peers"][0]["ip"] = "10.0.0.2"; },
     "$.sync.peers[0].ip", "unknown key \"ip\", expected one of: id, address"},
    {"SyncPeerIsSelf", [](json& j) { j["sync"] = sync_section(); j["sync"]["peers"][1]["id"] = 1; },
     "$.sync.peers[1].id", "expected another gateway's id, got this gateway's own (1)"},
    {"SyncPeerIdTwice", [](json& j) { j["sync"] = sync_section(); j["sync"]["peers"][1]["id"] = 2; },
     "$.sync.peers[1].id", "expected a unique id, got 2 twice"},
    {"SyncPeerAddressNoPort", [](json& j) { j["sync"] = sync_section(); j["sync"]["peers"][0]["address"] = "10.0.0.2"; },
     "$.sync.peers[0].address",
     "expected an IP address and a UDP port like \"10.0.0.1:7470\" or \"[fd00::1]:7470\", got \"10.0.0.2\""},
    // --- policy --------------------------------------------------------------------------------
    {"PolicyNotObject", [](json& j) { j["policy"] = J(R"(["10.96.0.10"])"); }, "$.policy",
     "expected an object like {\"egress_firewall\": \"enforce\", \"dns_servers\": [\"10.96.0.10\"]}, got an array"},
    {"UnknownPolicy", [](json& j) { j["policy"] = J(R"({"dns": []})"); }, "$.policy.dns",
     "unknown key \"dns\", expected one of: egress_firewall, egress_firewall_reject, dns_servers"},
    {"DnsServersNotArray", [](json& j) { j["policy"] = J(R"({"dns_servers": "10.96.0.10"})"); },
     "$.policy.dns_servers",
     "expected an array of DNS servers like [\"10.96.0.10\", \"[fd00::53]:5353\"] (empty: those of "
     "/etc/resolv.conf), got \"10.96.0.10\""},
    {"DnsServerHostName", [](json& j) { j["policy"] = J(R"({"dns_servers": ["10.96.0.10", "kube-dns"]})"); },
     "$.policy.dns_servers[1]",
     "expected a DNS server's IP address, optionally with a UDP port: \"10.96.0.10\", \"10.96.0.10:5353\", "
     "\"fd00::53\" or \"[fd00::53]:5353\", got \"kube-dns\""},
    {"DnsServerPortZero", [](json& j) { j["policy"] = J(R"({"dns_servers": ["10.96.0.10:0"]})"); },
     "$.policy.dns_servers[0]",
     "expected a DNS server's IP address, optionally with a UDP port: \"10.96.0.10\", \"10.96.0.10:5353\", "
     "\"fd00::53\" or \"[fd00::53]:5353\", got \"10.96.0.10:0\""},
    {"DnsServerNotString", [](json& j) { j["policy"] = J(R"({"dns_servers": [53]})"); },
     "$.policy.dns_servers[0]",
     "expected a DNS server's IP address, optionally with a UDP port: \"10.96.0.10\", \"10.96.0.10:5353\", "
     "\"fd00::53\" or \"[fd00::53]:5353\", got 53"},
    {"DnsServerTwice", [](json& j) { j["policy"] = J(R"({"dns_servers": ["10.96.0.10", "10.96.0.10:53"]})"); },
     "$.policy.dns_servers[1]", "expected each server once, got 10.96.0.10:53 twice"},
};

#undef J

INSTANTIATE_TEST_SUITE_P(Config, FieldError, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------------------------------------
// The files shipped in config/
// ---------------------------------------------------------------------------------------------

TEST(ShippedFiles, DemoLoadsWithTheAgreedTopology) {
    const std::string file = source_root() + "/config/demo.json";
    Config c = load_file(file);
    EXPECT_EQ(c.eal.lcores, "0-1");
    EXPECT_EQ(c.eal.main_lcore, 0u);
    EXPECT_EQ(c.workers, (std::vector<unsigned>{1}));
    EXPECT_TRUE(c.eal.no_huge);
    EXPECT_EQ(c.eal.memory_mb, 512u);
    EXPECT_EQ(c.eal.file_prefix, "egw-demo");
    EXPECT_EQ(c.eal.vdevs, (std::vector<std::string>{
                               "net_af_packet0,iface=egw-pods,qpairs=1", "net_af_packet1,iface=egw-pods2,qpairs=1",
                               "net_af_packet2,iface=egw-ext1,qpairs=1", "net_af_packet3,iface=egw-ext2,qpairs=1"}));
    EXPECT_EQ(c.mempool.mbufs, 8191u);

    struct Want {
        const char* name;
        const char* device;
        PortRole role;
        const char* vrf;
        const char* address;
        const char* address6;
        const char* mac;
    };
    // Dual-stack: scripts/netns.sh's IPv4 and IPv6 (EGW_NETNS_IPV6=1) networks, egwd at .1 and ::1.
    const Want want[] = {
        {"pods", "net_af_packet0", PortRole::inside, "default", "10.244.1.1/24", "fd00:10:244:1::1/64",
         "02:e9:00:00:00:01"},
        {"pods2", "net_af_packet1", PortRole::inside, "default", "10.244.2.1/24", "fd00:10:244:2::1/64",
         "02:e9:00:00:00:02"},
        {"ext1", "net_af_packet2", PortRole::outside, "default", "192.0.2.1/24", "2001:db8:2::1/64",
         "02:e9:00:00:00:03"},
        {"ext2", "net_af_packet3", PortRole::outside, "blue", "198.51.100.1/24", "2001:db8:100::1/64",
         "02:e9:00:00:00:04"},
    };
    ASSERT_EQ(c.ports.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE(want[i].name);
        EXPECT_EQ(c.ports[i].name, want[i].name);
        EXPECT_EQ(c.ports[i].device, want[i].device);
        EXPECT_EQ(c.ports[i].role, want[i].role);
        EXPECT_EQ(c.ports[i].vrf, want[i].vrf);
        EXPECT_EQ(c.ports[i].addresses, (std::vector<IpPrefix>{prefix(want[i].address), prefix(want[i].address6)}));
        EXPECT_EQ(c.ports[i].mac, mac(want[i].mac));
    }
    ASSERT_EQ(c.vrfs.size(), 2u);
    EXPECT_EQ(c.vrfs[1].name, "blue");
    EXPECT_EQ(c.vrfs[1].table, 100u);
    ASSERT_EQ(c.routes.size(), 1u);
    EXPECT_EQ(c.routes[0].vrf, "default");
    EXPECT_EQ(c.routes[0].prefix, prefix("203.0.113.0/24"));
    EXPECT_EQ(c.routes[0].via, ip("192.0.2.254"));
    EXPECT_EQ(c.routes[0].port, "ext1");
    EXPECT_EQ(c.cluster.pod_cidrs, (std::vector<IpPrefix>{prefix("10.244.0.0/16"), prefix("fd00:10:244::/48")}));
    EXPECT_EQ(c.cluster.service_cidrs, (std::vector<IpPrefix>{prefix("10.96.0.0/12"), prefix("fd00:10:96::/112")}));
    EXPECT_EQ(c.cluster.node_ips, (std::vector<IpAddr>{ip("172.18.0.2"), ip("172.18.0.3")}));
    EXPECT_EQ(c.default_action, DefaultAction::masquerade);
    EXPECT_EQ(c.sessions.max_sessions, 65536u);
    EXPECT_EQ(c.sessions.timeouts.tcp_established_s, 300u);
    EXPECT_EQ(c.sessions.timeouts.tcp_transitory_s, 30u);
    EXPECT_EQ(c.sessions.timeouts.udp_s, 30u);
    EXPECT_EQ(c.sessions.timeouts.icmp_s, 10u);
    EXPECT_EQ(c.node.name, "gw-1");
    EXPECT_EQ(c.node.labels, (std::map<std::string, std::string>{{"egw.example.com/gateway", "true"}}));
    EXPECT_EQ(c.state.source, StateSource::files);
    EXPECT_EQ(fs::path(c.state.path),
              fs::absolute(fs::path(source_root()) / "config" / "demo-manifests").lexically_normal());
}

TEST(Metrics, AbsentSectionMeansNoEndpoint) {
    Config c = load_text(base().dump(), kFile);
    EXPECT_FALSE(c.metrics.enabled);
}

TEST(Metrics, EmptySectionServesOnTheDefaultAddress) {
    json j = base();
    j["metrics"] = json::object();
    Config c = load_text(j.dump(), kFile);
    EXPECT_TRUE(c.metrics.enabled);
    EXPECT_EQ(c.metrics.host, "127.0.0.1");
    EXPECT_EQ(c.metrics.port, 9469);
}

TEST(Metrics, ListenAndEnabledLand) {
    json j = base();
    j["metrics"] = {{"listen", "0.0.0.0:9100"}, {"enabled", true}};
    Config c = load_text(j.dump(), kFile);
    EXPECT_TRUE(c.metrics.enabled);
    EXPECT_EQ(c.metrics.host, "0.0.0.0");
    EXPECT_EQ(c.metrics.port, 9100);
    j["metrics"] = {{"listen", "192.0.2.1:65535"}, {"enabled", false}};
    c = load_text(j.dump(), kFile);
    EXPECT_FALSE(c.metrics.enabled);
    EXPECT_EQ(c.metrics.host, "192.0.2.1");
    EXPECT_EQ(c.metrics.port, 65535);
    // IPv6 in brackets, kept in canonical form; "[::]" listens on every address of both families.
    j["metrics"] = {{"listen", "[0:0::0]:9469"}};
    c = load_text(j.dump(), kFile);
    EXPECT_EQ(c.metrics.host, "::");
    EXPECT_EQ(format_listen(c.metrics), "[::]:9469");
    j["metrics"] = {{"listen", "[2001:DB8::1]:9100"}};
    EXPECT_EQ(load_text(j.dump(), kFile).metrics.host, "2001:db8::1");
}

json expect_round_trip(const Config& c);  // below, with the other round trips

TEST(Sync, AbsentSectionMeansNoSync) {
    Config c = load_text(base().dump(), kFile);
    EXPECT_FALSE(c.sync.enabled);
    EXPECT_FALSE(to_json(c).contains("sync"));
}

TEST(Sync, SectionLandsAndRoundTrips) {
    json j = base();
    j["sync"] = sync_section();
    j["sync"]["mtu"] = 9000;
    j["sync"]["standby_max_sessions"] = 250000;
    j["sync"]["peers"][1]["address"] = "[FD00:0::3]:7471";
    Config c = load_text(j.dump(), "/etc/egw/egw.json");
    EXPECT_TRUE(c.sync.enabled);
    EXPECT_EQ(c.sync.id, 1u);
    EXPECT_EQ(c.sync.host, "10.0.0.1");
    EXPECT_EQ(c.sync.port, 7470);
    EXPECT_EQ(c.sync.key_file, "/etc/egw/sync.key") << "relative to the configuration file";
    EXPECT_EQ(c.sync.mtu, 9000u);
    EXPECT_EQ(c.sync.standby_max_sessions, 250000u);
    ASSERT_EQ(c.sync.peers.size(), 2u);
    EXPECT_EQ(c.sync.peers[0], (SyncPeerConfig{2, "10.0.0.2", 7470}));
    EXPECT_EQ(c.sync.peers[1], (SyncPeerConfig{3, "fd00::3", 7471}));
    j["sync"].erase("mtu");
    EXPECT_EQ(load_text(j.dump(), kFile).sync.mtu, 1500u) << "the default";
    j["sync"].erase("standby_max_sessions");
    EXPECT_EQ(load_text(j.dump(), kFile).sync.standby_max_sessions, 1000000u) << "the default";
    json dump = expect_round_trip(c);
    EXPECT_EQ(dump["sync"]["peers"][1]["address"], "[fd00::3]:7471");
}

TEST(EgressIP, CapacityLandsRoundTripsAndNeedsARestart) {
    json j = base();
    EXPECT_EQ(load_text(j.dump(), kFile).egress_ip.capacity, std::nullopt) << "absent: unlimited";
    j["egress_ip"] = {{"capacity", 0}};
    EXPECT_EQ(load_text(j.dump(), kFile).egress_ip.capacity, 0u) << "0: the node hosts none";
    j["egress_ip"] = {{"capacity", 12}};
    Config running = load_text(j.dump(), kFile);
    EXPECT_EQ(running.egress_ip.capacity, 12u);
    json dump = expect_round_trip(running);
    EXPECT_EQ(dump["egress_ip"]["capacity"], 12);
    j["egress_ip"]["capacity"] = 13;
    ConfigChanges ch = compare_for_reload(running, load_text(j.dump(), kFile));
    EXPECT_TRUE(ch.live.empty());
    EXPECT_EQ(ch.restart, (std::vector<std::string>{"egress_ip.capacity"})) << "published in the Lease at start";
}

TEST(Sync, ChangingItNeedsARestart) {
    json j = base();
    j["sync"] = sync_section();
    Config running = load_text(j.dump(), kFile);
    j["sync"]["peers"][0]["address"] = "10.0.0.9:7470";
    ConfigChanges ch = compare_for_reload(running, load_text(j.dump(), kFile));
    EXPECT_TRUE(ch.live.empty());
    EXPECT_EQ(ch.restart, (std::vector<std::string>{"sync.peers[0].address"}));
}

TEST(Policy, AbsentSectionMeansResolvConf) {
    Config c = load_text(base().dump(), kFile);
    EXPECT_TRUE(c.policy.dns_servers.empty());
    EXPECT_FALSE(to_json(c).contains("policy"));
}

TEST(Policy, DnsServersAreCanonicalAndRoundTrip) {
    json j = base();
    j["policy"] = json::parse(R"({"dns_servers": ["10.96.0.10", "FD00:0::53", "10.96.0.11:5353", "[fd00::54]:53"]})");
    Config c = load_text(j.dump(), kFile);
    EXPECT_EQ(c.policy.dns_servers,
              (std::vector<std::string>{"10.96.0.10:53", "[fd00::53]:53", "10.96.0.11:5353", "[fd00::54]:53"}));
    json dump = expect_round_trip(c);
    EXPECT_EQ(dump["policy"]["dns_servers"][1], "[fd00::53]:53");
    j["policy"] = json::parse(R"({"dns_servers": []})");
    EXPECT_TRUE(load_text(j.dump(), kFile).policy.dns_servers.empty());
}

TEST(Policy, ChangingDnsServersNeedsARestart) {
    json j = base();
    j["policy"] = json::parse(R"({"dns_servers": ["10.96.0.10"]})");
    Config running = load_text(j.dump(), kFile);
    j["policy"]["dns_servers"][0] = "10.96.0.11";
    ConfigChanges ch = compare_for_reload(running, load_text(j.dump(), kFile));
    EXPECT_TRUE(ch.live.empty());
    EXPECT_EQ(ch.restart, (std::vector<std::string>{"policy.dns_servers[0]"}));
}

TEST(ShippedFiles, DemoServesMetricsOnLoopback) {
    Config c = load_file(source_root() + "/config/demo.json");
    EXPECT_TRUE(c.metrics.enabled);
    EXPECT_EQ(c.metrics.host, "127.0.0.1");
    EXPECT_EQ(c.metrics.port, 9469);
}

TEST(ShippedFiles, ExampleNicLoads) {
    Config c = load_file(source_root() + "/config/example-nic.json");
    EXPECT_FALSE(c.eal.no_huge);
    EXPECT_EQ(c.eal.memory_mb, 2048u);
    EXPECT_EQ(c.workers.size(), 2u);
    EXPECT_EQ(c.eal.pci_allow.size(), 3u);
    EXPECT_EQ(c.state.source, StateSource::kubernetes);
    ASSERT_EQ(c.vrfs.size(), 2u);
    // Two outside ports, one of them in VRF blue, and a default route in each VRF.
    std::map<std::string, size_t> outside;
    for (const auto& p : c.ports)
        if (p.role == PortRole::outside) ++outside[p.vrf];
    EXPECT_EQ(outside, (std::map<std::string, size_t>{{"blue", 1}, {"default", 1}}));
    for (const auto& v : c.vrfs) {
        SCOPED_TRACE(v.name);
        EXPECT_TRUE(std::any_of(c.routes.begin(), c.routes.end(), [&](const RouteConfig& r) {
            return r.vrf == v.name && r.prefix.len == 0 && r.via.has_value();
        }));
    }
}

// ---------------------------------------------------------------------------------------------
// to_json: the loaded configuration written back in the file's shape
// ---------------------------------------------------------------------------------------------

// Writes to_json(c) to a file of a fresh directory (not c's own), loads it, and checks that the
// result is `c` again (apart from Config::file) and dumps to the same document. Returns the dump.
json expect_round_trip(const Config& c) {
    const json dump = to_json(c);
    TempDir dir;
    const fs::path file = dir.write("elsewhere/egw.json", dump.dump(2));
    Config back;
    try {
        back = load_file(file.string());
    } catch (const ConfigError& e) {
        ADD_FAILURE() << "the dump does not load: " << e.what() << "\n" << dump.dump(2);
        return dump;
    }
    EXPECT_EQ(back.file, file.string());
    EXPECT_EQ(to_json(back), dump);
    back.file = c.file;
    EXPECT_TRUE(back == c) << "loads back to a different configuration:\n"
                           << dump.dump(2) << "\nvs\n"
                           << to_json(back).dump(2);
    return dump;
}

TEST(Vlans, LoadAsPortsOfTheirParentAndRoundTrip) {
    json j = base();
    j["ports"][1]["mtu"] = 9000;
    j["ports"].push_back(vlan_port("out-v100", "out", 100));
    j["ports"][3]["vrf"] = "blue";
    j["ports"][3]["mtu"] = 1500;
    j["ports"].push_back(vlan_port("out-v4094", "out", 4094));
    j["ports"].push_back(vlan_port("in-v100", "in", 100));  // the same VLAN id on another parent
    j["ports"][5]["role"] = "inside";
    Config c = load_text(j.dump(), kFile);
    ASSERT_EQ(c.ports.size(), 6u);
    const PortConfig& v = c.ports[3];
    EXPECT_TRUE(v.is_vlan());
    EXPECT_FALSE(c.ports[1].is_vlan());
    EXPECT_EQ(v.parent, "out");
    EXPECT_EQ(v.vlan, 100u);
    EXPECT_EQ(v.device, "");
    EXPECT_EQ(v.vrf, "blue");
    EXPECT_EQ(v.mtu, 1500u);
    EXPECT_EQ(c.ports[4].vlan, 4094u);
    EXPECT_EQ(c.ports[4].mtu, 1500u) << "the default MTU";
    EXPECT_EQ(c.ports[5].role, PortRole::inside);
    json dumped = expect_round_trip(c);
    EXPECT_EQ(dumped["ports"][3]["parent"], "out");
    EXPECT_EQ(dumped["ports"][3]["vlan"], 100);
    EXPECT_FALSE(dumped["ports"][3].contains("device"));
}

// Every key the loader reads, each set to something other than its default, written the way
// to_json writes it: defaults spelt out, VRF "default" first, paths absolute. Host bits, devices
// and PCI devargs are kept as written. Loaded from /srv/egw/egw.json.
json full_files_document() {
    return json::parse(R"({
      "eal": {"lcores": "0-3", "main_lcore": 3, "no_huge": false, "memory_mb": 2048, "file_prefix": "egw-x",
              "vdevs": ["net_tap0,iface=egw0", "net_null0"], "pci_allow": ["0000:01:00.0", "02:00.1,rx_vec_en=0"],
              "extra_args": ["--log-level=lib.eal:debug", "--in-memory"]},
      "workers": [2, 0, 1],
      "mempool": {"mbufs": 32767, "cache": 512, "data_room": 9344},
      "ports": [
        {"name": "pods", "device": "net_tap0", "role": "inside", "vrf": "default",
         "addresses": ["10.244.1.1/24", "10.244.9.1/32"], "mac": "02:00:00:00:00:01", "mtu": 9000,
         "rx_desc": 2048, "tx_desc": 512, "queues": 2},
        {"name": "up", "device": "0000:01:00.0", "role": "outside", "vrf": "default", "addresses": ["192.0.2.1/24"],
         "mtu": 1500, "rx_desc": 1024, "tx_desc": 1024},
        {"name": "blue", "device": "02:00.1", "role": "outside", "vrf": "blue", "addresses": ["198.51.100.1/25"],
         "mtu": 1500, "rx_desc": 1024, "tx_desc": 1024},
        {"name": "sink", "device": "net_null0", "role": "outside", "vrf": "red", "addresses": [],
         "mtu": 1500, "rx_desc": 1024, "tx_desc": 1024}
      ],
      "neighbors": [{"port": "up", "ip": "192.0.2.254", "mac": "02:00:00:00:00:fe"},
                    {"port": "blue", "ip": "198.51.100.126", "mac": "02:00:00:00:01:fe"}],
      "vrfs": [{"name": "default", "table": 254}, {"name": "blue", "table": 100}, {"name": "red", "table": 4294967294}],
      "routes": [
        {"vrf": "default", "prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "up"},
        {"vrf": "blue", "prefix": "0.0.0.0/0", "via": "198.51.100.126", "port": "blue"},
        {"vrf": "red", "prefix": "203.0.113.0/24", "port": "sink"}
      ],
      "cluster": {"pod_cidrs": ["10.244.0.0/16", "10.245.0.0/16"], "service_cidrs": ["10.96.0.0/12"],
                  "node_ips": ["172.18.0.2", "172.18.0.3"]},
      "default_action": "drop",
      "sessions": {"max": 1000, "max_ipv6": 0, "port_min": 2000, "port_max": 3000,
                   "timeouts": {"tcp_established": 1, "tcp_transitory": 2, "tcp_half_closed": 5, "udp": 3, "icmp": 4},
                   "tcp_open": "strict", "max_per_pod": 7},
      "icmp": {"errors_per_second": 20, "burst": 5},
      "reassembly": {"max_datagrams": 1024, "max_fragments": 3, "timeout_ms": 30000},
      "ingress": {"via": "10.244.1.254", "via6": "fe80::fe", "port": "pods"},
      "arp": {"max_neighbors": 10, "hold_packets": 0, "retry_ms": 100, "reachable_s": 45, "probes": 4,
              "unused_s": 120, "announce_count": 2, "announce_interval_ms": 100},
      "node": {"name": "gw-1.example.com", "labels": {"egw.example.com/gateway": "true", "zone": ""}},
      "state": {"source": "files", "path": "/srv/egw/manifests", "poll_ms": 500},
      "metrics": {"enabled": true, "listen": "0.0.0.0:9100"},
      "policy": {"egress_firewall": "off", "egress_firewall_reject": "icmp"}
    })");
}

json full_kubernetes_document() {
    json j = full_files_document();
    j["state"] = json::parse(R"({"source": "kubernetes", "poll_ms": 500, "kubeconfig": "/srv/egw/kube/config",
                                 "election": "external", "lease_namespace": "egw-system", "lease_duration_s": 30,
                                 "renew_deadline_ms": 20000, "retry_period_ms": 5000, "refusal_grace_ms": 10000})");
    return j;
}

// The same ports and references with nothing else set.
json minimal_document() {
    return json::parse(R"({
      "eal": {"vdevs": ["net_tap0", "net_null0"], "pci_allow": ["0000:01:00.0", "02:00.1"]},
      "workers": [1],
      "ports": [
        {"name": "pods", "device": "net_tap0", "role": "inside"},
        {"name": "up", "device": "0000:01:00.0", "role": "outside"}
      ],
      "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
      "node": {"name": "gw-1"},
      "state": {"path": "m"}
    })");
}

// The JSON pointers of `j`'s leaves (scalars and arrays) under `at`.
void leaves(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
    if (!j.is_object()) {
        out.push_back(at);
        return;
    }
    for (const auto& [k, v] : j.items())
        leaves(v, at / k, out);
}

TEST(ToJson, EveryKeyOfAFullFileIsWrittenBackAsWritten) {
    for (const json& doc : {full_files_document(), full_kubernetes_document()}) {
        SCOPED_TRACE(doc["state"]["source"].get<std::string>());
        Config c = load_text(doc.dump(), "/srv/egw/egw.json");
        EXPECT_EQ(to_json(c), doc) << to_json(c).dump(2);
        expect_round_trip(c);
    }
}

// The full documents above set every scalar setting to something other than its default, so a
// setting that to_json forgot (or wrote under the loader's default) cannot pass the test above.
TEST(ToJson, TheFullDocumentsDifferFromTheDefaultsEverywhere) {
    const json full = full_files_document();
    const json defaults = to_json(load_text(minimal_document().dump(), "/srv/egw/egw.json"));
    std::vector<json::json_pointer> checked;
    for (const char* section :
         {"eal", "workers", "mempool", "default_action", "sessions", "arp", "icmp", "ingress", "node", "metrics"})
        leaves(full[section], json::json_pointer() / section, checked);
    for (const char* key : {"/ports/0/mac", "/ports/0/mtu", "/ports/0/rx_desc", "/ports/0/tx_desc",
                            "/ports/0/addresses", "/state/path", "/state/poll_ms"})
        checked.emplace_back(key);
    for (const auto& p : checked)
        EXPECT_NE(full.at(p), defaults.contains(p) ? defaults.at(p) : json()) << p.to_string();
    EXPECT_EQ(defaults.at(json::json_pointer("/state/source")), "files");
    EXPECT_FALSE(defaults["ports"][0].contains("mac"));

    json k8s_minimal = minimal_document();
    k8s_minimal["state"] = {{"source", "kubernetes"}};
    const json k8s_defaults = to_json(load_text(k8s_minimal.dump(), "/srv/egw/egw.json"));
    const json k8s_full = full_kubernetes_document();
    for (const auto& [k, v] : k8s_full["state"].items()) {
        if (k == "source") continue;  // both kubernetes; the default is files, checked above
        EXPECT_NE(v, k8s_defaults["state"].value(k, json())) << k;
    }
}

TEST(ToJson, StateHoldsOnlyTheKeysOfItsSource) {
    Config files = load_text(minimal_document().dump(), "/srv/egw/egw.json");
    json f = to_json(files)["state"];
    EXPECT_EQ(f, json::parse(R"({"source": "files", "path": "/srv/egw/m", "poll_ms": 200})"));

    json doc = minimal_document();
    doc["state"] = {{"source", "kubernetes"}};
    json k = to_json(load_text(doc.dump(), "/srv/egw/egw.json"))["state"];
    EXPECT_EQ(k, json::parse(R"({"source": "kubernetes", "poll_ms": 200, "kubeconfig": "", "election": "leader",
                                 "lease_namespace": "", "lease_duration_s": 2, "renew_deadline_ms": 1500,
                                 "retry_period_ms": 500, "refusal_grace_ms": 5000})"));
}

TEST(ToJson, AbsentMacAndNextHopAreLeftOutNotNull) {
    Config c = load_text(full_files_document().dump(), "/srv/egw/egw.json");
    json j = to_json(c);
    EXPECT_FALSE(j["ports"][1].contains("mac"));
    EXPECT_FALSE(j["routes"][2].contains("via"));
    EXPECT_EQ(j["routes"][2]["port"], "sink");
}

TEST(ToJson, MetricsWithoutASectionIsWrittenDisabled) {
    Config c = load_text(base().dump(), kFile);
    ASSERT_FALSE(c.metrics.enabled);
    json j = expect_round_trip(c);
    EXPECT_EQ(j["metrics"], json::parse(R"({"enabled": false, "listen": "127.0.0.1:9469"})"));

    // Disabled with a listen address of its own: both survive.
    json doc = base();
    doc["metrics"] = {{"enabled", false}, {"listen", "192.0.2.1:65535"}};
    j = expect_round_trip(load_text(doc.dump(), kFile));
    EXPECT_EQ(j["metrics"], json::parse(R"({"enabled": false, "listen": "192.0.2.1:65535"})"));

    doc["metrics"] = json::object();
    j = expect_round_trip(load_text(doc.dump(), kFile));
    EXPECT_EQ(j["metrics"], json::parse(R"({"enabled": true, "listen": "127.0.0.1:9469"})"));
}

TEST(ToJson, LcoreMappingSyntaxRoundTrips) {
    json doc = base();
    doc["eal"]["lcores"] = "0@0,(1-2)@(4-5)";
    doc["workers"] = {1, 2};
    json j = expect_round_trip(load_text(doc.dump(), kFile));
    EXPECT_EQ(j["eal"]["lcores"], "0@0,(1-2)@(4-5)");
}

// Relative paths are resolved by the loader against the file's directory, so the dump holds
// absolute ones and loads the same from any directory.
TEST(ToJson, RelativePathsAreWrittenResolved) {
    TempDir dir;
    json doc = base();
    doc["state"]["path"] = "../manifests";
    Config c = load_file(dir.write("etc/egw.json", doc.dump()).string());
    json j = expect_round_trip(c);
    EXPECT_EQ(j["state"]["path"], (dir.path() / "manifests").string());

    doc["state"] = {{"source", "kubernetes"}, {"kubeconfig", "kube/config"}};
    c = load_file(dir.write("etc/egw.json", doc.dump()).string());
    j = expect_round_trip(c);
    EXPECT_EQ(j["state"]["kubeconfig"], (dir.path() / "etc" / "kube" / "config").string());
}

TEST(ToJson, ShippedFilesRoundTrip) {
    for (const char* name : {"demo.json", "bench-rig.json", "example-nic.json"}) {
        SCOPED_TRACE(name);
        const std::string file = source_root() + "/config/" + name;
        expect_round_trip(load_file(file));
    }
}

TEST(ToJson, ShippedFilesSpotChecks) {
    json demo = to_json(load_file(source_root() + "/config/demo.json"));
    EXPECT_EQ(demo["metrics"], json::parse(R"({"enabled": true, "listen": "127.0.0.1:9469"})"));
    EXPECT_EQ(demo["state"]["source"], "files");
    EXPECT_EQ(fs::path(demo["state"]["path"].get<std::string>()),
              fs::absolute(fs::path(source_root()) / "config" / "demo-manifests").lexically_normal());
    EXPECT_FALSE(demo["state"].contains("kubeconfig"));
    EXPECT_FALSE(demo["state"].contains("election"));
    EXPECT_EQ(demo["eal"]["file_prefix"], "egw-demo");
    EXPECT_EQ(demo["mempool"]["mbufs"], 8191);
    EXPECT_EQ(demo["ports"][3]["vrf"], "blue");
    EXPECT_EQ(demo["ports"][3]["mac"], "02:e9:00:00:00:04");

    json rig = to_json(load_file(source_root() + "/config/bench-rig.json"));
    EXPECT_EQ(rig["metrics"]["enabled"], false);
    EXPECT_EQ(rig["mempool"]["mbufs"], 75535);
    EXPECT_EQ(rig["sessions"]["max"], 2000000);
    EXPECT_EQ(rig["neighbors"][1]["mac"], "02:00:00:00:00:01");

    json nic = to_json(load_file(source_root() + "/config/example-nic.json"));
    EXPECT_EQ(nic["state"]["source"], "kubernetes");
    EXPECT_EQ(nic["state"]["kubeconfig"], "");
    EXPECT_EQ(nic["state"]["election"], "leader");
    EXPECT_EQ(nic["state"]["lease_duration_s"], 2);
    EXPECT_FALSE(nic["state"].contains("path"));
    EXPECT_EQ(nic["eal"]["pci_allow"].size(), 3u);
    EXPECT_EQ(nic["default_action"], "route");
}

// A kubernetes source with every election key and the metrics section away from the defaults,
// loaded from a file next to a relative kubeconfig.
TEST(ToJson, KubernetesSourceWithMetricsAndElection) {
    TempDir dir;
    json doc = base();
    doc["state"] = json::parse(R"({"source": "kubernetes", "kubeconfig": "kube/config", "election": "external",
                                   "lease_namespace": "egw-system", "lease_duration_s": 4,
                                   "renew_deadline_ms": 3000, "retry_period_ms": 500, "poll_ms": 50,
                                   "refusal_grace_ms": 8000})");
    doc["metrics"] = {{"listen", "0.0.0.0:9100"}};
    Config c = load_file(dir.write("egw.json", doc.dump()).string());
    json j = expect_round_trip(c);
    EXPECT_EQ(j["metrics"], json::parse(R"({"enabled": true, "listen": "0.0.0.0:9100"})"));
    EXPECT_EQ(j["state"]["kubeconfig"], (dir.path() / "kube" / "config").string());
    EXPECT_EQ(j["state"]["election"], "external");
    EXPECT_EQ(j["state"]["lease_namespace"], "egw-system");
    EXPECT_EQ(j["state"]["lease_duration_s"], 4);
    EXPECT_EQ(j["state"]["renew_deadline_ms"], 3000);
    EXPECT_EQ(j["state"]["retry_period_ms"], 500);
    EXPECT_EQ(j["state"]["poll_ms"], 50);
    EXPECT_EQ(j["state"]["refusal_grace_ms"], 8000);
    EXPECT_FALSE(j["state"].contains("path"));
}

// Both families side by side: several addresses of each per port, routes, neighbours and cluster
// ranges of either family, each landing as written (IPv6 canonicalised), and a round trip.
TEST(Load, DualStackEveryIpv6FieldLands) {
    json j = base();
    j["ports"][0]["addresses"] = {"10.244.1.1/24", "fd00:10:244:1::1/64", "2001:DB8:0:1::1/64", "10.244.9.1/32"};
    j["ports"][1]["addresses"] = {"2001:db8:ff::1/64", "192.0.2.1/24"};
    j["ports"][2]["addresses"] = {"198.51.100.1/24", "2001:db8:100::1/64"};
    j["neighbors"] = json::parse(R"([{"port": "out", "ip": "2001:db8:ff::fe", "mac": "02:00:00:00:00:fe"},
                           {"port": "out", "ip": "fe80::1", "mac": "02:00:00:00:00:fd"},
                           {"port": "out", "ip": "192.0.2.254", "mac": "02:00:00:00:00:fc"}])");
    j["routes"] = json::parse(R"([{"prefix": "::/0", "via": "fe80::1", "port": "out"},
                        {"prefix": "0.0.0.0/0", "via": "192.0.2.254", "port": "out"},
                        {"vrf": "blue", "prefix": "2001:db8:200::/48", "via": "2001:db8:100::fe", "port": "blue1"},
                        {"vrf": "blue", "prefix": "2001:db8:300::/48", "port": "blue1"}])");
    j["cluster"] = json::parse(R"({"pod_cidrs": ["10.244.0.0/16", "fd00:10:244::/56"],
                         "service_cidrs": ["fd00:10:96::/112", "10.96.0.0/12"],
                         "node_ips": ["172.18.0.2", "fc00:f853:ccd:e793::2"]})");
    const Config c = load_text(j.dump(), kFile);

    EXPECT_EQ(c.ports[0].addresses, (std::vector<IpPrefix>{prefix("10.244.1.1/24"), prefix("fd00:10:244:1::1/64"),
                                                           prefix("2001:db8:0:1::1/64"), prefix("10.244.9.1/32")}));
    EXPECT_TRUE(c.ports[0].addresses[1].is_v6());
    EXPECT_EQ(c.ports[1].addresses, (std::vector<IpPrefix>{prefix("2001:db8:ff::1/64"), prefix("192.0.2.1/24")}));
    ASSERT_EQ(c.neighbors.size(), 3u);
    EXPECT_EQ(c.neighbors[0].ip, ip("2001:db8:ff::fe"));
    EXPECT_EQ(c.neighbors[1].ip, ip("fe80::1")) << "a link-local neighbour is on-link on any port";
    EXPECT_EQ(c.neighbors[2].ip, ip("192.0.2.254"));
    ASSERT_EQ(c.routes.size(), 4u);
    EXPECT_EQ(c.routes[0].prefix, prefix("::/0"));
    EXPECT_EQ(c.routes[0].via, ip("fe80::1"));
    EXPECT_EQ(c.routes[1].prefix, prefix("0.0.0.0/0"));
    EXPECT_EQ(c.routes[2].vrf, "blue");
    EXPECT_EQ(c.routes[2].prefix, prefix("2001:db8:200::/48"));
    EXPECT_EQ(c.routes[2].via, ip("2001:db8:100::fe"));
    EXPECT_FALSE(c.routes[3].via.has_value());
    EXPECT_EQ(c.cluster.pod_cidrs, (std::vector<IpPrefix>{prefix("10.244.0.0/16"), prefix("fd00:10:244::/56")}));
    EXPECT_EQ(c.cluster.service_cidrs, (std::vector<IpPrefix>{prefix("fd00:10:96::/112"), prefix("10.96.0.0/12")}));
    EXPECT_EQ(c.cluster.node_ips, (std::vector<IpAddr>{ip("172.18.0.2"), ip("fc00:f853:ccd:e793::2")}));

    const json dump = expect_round_trip(c);
    EXPECT_EQ(dump["ports"][0]["addresses"][2], "2001:db8:0:1::1/64") << "written in the canonical form";
    EXPECT_EQ(dump["routes"][0]["via"], "fe80::1");
    EXPECT_EQ(dump["cluster"]["node_ips"][1], "fc00:f853:ccd:e793::2");
}

// An IPv6-only port (no IPv4 address) loads; an IPv6-only cluster too.
TEST(Load, Ipv6OnlyPortsAndCluster) {
    json j = base();
    j["ports"][0]["addresses"] = {"fd00:10:244:1::1/64"};
    j["cluster"]["pod_cidrs"] = {"fd00:10:244::/56"};
    const Config c = load_text(j.dump(), kFile);
    ASSERT_EQ(c.ports[0].addresses.size(), 1u);
    EXPECT_TRUE(c.ports[0].addresses[0].is_v6());
    EXPECT_EQ(c.cluster.pod_cidrs, (std::vector<IpPrefix>{prefix("fd00:10:244::/56")}));
    expect_round_trip(c);
}

}  // namespace

// Found by the config fuzzer: a number past a double's range escaped load_text() as the JSON
// library's out_of_range instead of a ConfigError.
TEST(LoadText, NumberTooLargeIsAConfigError) {
    std::string e = error_of(R"({"workers": [1e400]})");
    EXPECT_EQ(e.rfind(std::string(kFile) + ": $: expected valid JSON, got number overflow parsing '1e400'", 0), 0u)
        << e;
}
