// SPDX-License-Identifier: Apache-2.0
//
// The rte_acl EgressFirewall classifier (dataplane/tables/egress_firewall.h) built from expanded
// model rules (control/firewall/acl_rules.h): fixed cases, a differential test against
// model::evaluate_egress_firewall() over random rule sets and flows, and the cost of building an
// 8,000-rule table and of classifying (printed, not asserted: docs/performance.md records them).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "control/firewall/acl_rules.h"

using namespace egw;
using model::FirewallAction;
using model::FirewallFlow;
using model::FirewallRule;
using model::FirewallVerdict;
using net::IpAddr;
using net::IpPrefix;

namespace {

IpAddr ip(const std::string& s) {
    return *net::parse_ip(s);
}

IpPrefix cidr(const std::string& s) {
    return *net::parse_prefix(s);
}

// Classifies one flow of firewall `id` through the table, as a worker's burst would.
uint32_t classify(const dp::EgressFirewallTable& t, uint32_t id, const FirewallFlow& f) {
    uint32_t result = 0xdeadbeef;
    if (f.dst.is_v4()) {
        dp::FirewallKey4 k{};
        k.protocol = f.protocol;
        k.firewall_be = htonl(id);
        std::memcpy(&k.dst_be, f.dst.bytes().data(), 4);
        k.dst_port_be = htons(f.dst_port);
        const dp::FirewallKey4* keys[] = {&k};
        t.classify4(keys, &result, 1);
    } else {
        dp::FirewallKey6 k{};
        k.protocol = f.protocol;
        k.firewall_be = htonl(id);
        std::memcpy(k.dst, f.dst.bytes().data(), 16);
        k.dst_port_be = htons(f.dst_port);
        const dp::FirewallKey6* keys[] = {&k};
        t.classify6(keys, &result, 1);
    }
    return result;
}

// The table's answer in the model's terms.
FirewallVerdict verdict_of(uint32_t result) {
    if (!dp::firewall_matched(result)) return FirewallVerdict{};
    return FirewallVerdict{dp::firewall_denies(result) ? FirewallAction::deny : FirewallAction::allow,
                           dp::firewall_rule_index(result)};
}

std::unique_ptr<dp::EgressFirewallTable> build(const std::vector<firewall::NamespaceFirewall>& namespaces,
                                               uint32_t version = 1) {
    std::vector<dp::FirewallAclRule> acl = firewall::expand_acl_rules(namespaces);
    std::string error;
    auto t = dp::EgressFirewallTable::build(acl.data(), acl.size(), version, &error);
    EXPECT_TRUE(t) << error;
    return t;
}

}  // namespace

TEST(FirewallAcl, FirstMatchPortsFamiliesAndNamespaces) {
    const std::vector<FirewallRule> web = {
        {FirewallAction::allow, cidr("192.0.2.0/28"), {{IPPROTO_TCP, 443}, {IPPROTO_UDP, 0}}},
        {FirewallAction::deny, cidr("192.0.2.0/24"), {}},
        {FirewallAction::deny, cidr("2001:db8:0:1::/64"), {{IPPROTO_SCTP, 9}}},
        {FirewallAction::allow, model::FirewallDnsName{"unresolved.example", false}, {}},
        {FirewallAction::deny, cidr("::/0"), {}},
    };
    const std::vector<FirewallRule> db = {{FirewallAction::deny, cidr("0.0.0.0/0"), {{IPPROTO_TCP, 0}}}};
    std::vector<firewall::NamespaceFirewall> ns = {{"web", &web, model::resolve_egress_firewall(web, {}, {})},
                                                   {"db", &db, model::resolve_egress_firewall(db, {}, {})}};
    auto t = build(ns, 7);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->version(), 7u);
    EXPECT_EQ(t->rules4(), 4u);  // two ports of rule 0, rule 1, db's rule
    EXPECT_EQ(t->rules6(), 2u);

    struct Case {
        const char* what;
        uint32_t firewall;
        FirewallFlow flow;
        FirewallVerdict verdict;
    };
    const auto allow = FirewallAction::allow;
    const auto deny = FirewallAction::deny;
    const std::vector<Case> cases = {
        {"allow on the port, before the wider deny", 1, {ip("192.0.2.3"), IPPROTO_TCP, 443}, {allow, 0}},
        {"a protocol given without port: every port", 1, {ip("192.0.2.3"), IPPROTO_UDP, 1}, {allow, 0}},
        {"other port falls through", 1, {ip("192.0.2.3"), IPPROTO_TCP, 444}, {deny, 1}},
        {"ICMP (no ports) falls through", 1, {ip("192.0.2.3"), IPPROTO_ICMP, 0}, {deny, 1}},
        {"outside every IPv4 rule", 1, {ip("192.0.3.1"), IPPROTO_TCP, 443}, {}},
        {"IPv6 port rule", 1, {ip("2001:db8:0:1::5"), IPPROTO_SCTP, 9}, {deny, 2}},
        {"IPv6 catch-all", 1, {ip("2001:db8:0:1::5"), IPPROTO_SCTP, 10}, {deny, 4}},
        {"the other namespace's rules", 2, {ip("192.0.2.3"), IPPROTO_TCP, 443}, {deny, 0}},
        {"the other namespace, UDP", 2, {ip("192.0.2.3"), IPPROTO_UDP, 443}, {}},
        {"the other namespace has no IPv6 rule", 2, {ip("2001:db8::1"), IPPROTO_TCP, 443}, {}},
        {"a namespace without a firewall", 3, {ip("192.0.2.3"), IPPROTO_TCP, 443}, {}},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(verdict_of(classify(*t, c.firewall, c.flow)), c.verdict) << c.what;
        if (c.firewall <= ns.size()) {
            EXPECT_EQ(model::evaluate_egress_firewall(*ns[c.firewall - 1].rules, ns[c.firewall - 1].resolution, c.flow),
                      c.verdict)
                << "model: " << c.what;
        }
    }
}

// Tables of the same version live side by side (the published one and its replacement being built)
// and each keeps its own rules after the other is gone: rte_acl_create() would hand back an
// existing context of the same name.
TEST(FirewallAcl, TablesOfOneVersionAreIndependent) {
    const std::vector<FirewallRule> deny = {{FirewallAction::deny, cidr("10.0.0.0/8"), {}}};
    const std::vector<FirewallRule> allow = {{FirewallAction::allow, cidr("10.0.0.0/8"), {}},
                                             {FirewallAction::deny, cidr("2001:db8::/32"), {}}};
    auto a = build({{"a", &deny, model::resolve_egress_firewall(deny, {}, {})}}, 5);
    auto b = build({{"b", &allow, model::resolve_egress_firewall(allow, {}, {})}}, 5);
    ASSERT_TRUE(a && b);
    const FirewallFlow to_10{ip("10.1.2.3"), IPPROTO_UDP, 53};
    EXPECT_EQ(verdict_of(classify(*a, 1, to_10)), (FirewallVerdict{FirewallAction::deny, 0}));
    EXPECT_EQ(verdict_of(classify(*b, 1, to_10)), (FirewallVerdict{FirewallAction::allow, 0}));
    a.reset();
    EXPECT_EQ(verdict_of(classify(*b, 1, to_10)), (FirewallVerdict{FirewallAction::allow, 0}));
    EXPECT_EQ(verdict_of(classify(*b, 1, {ip("2001:db8::1"), IPPROTO_TCP, 1})),
              (FirewallVerdict{FirewallAction::deny, 1}));
}

TEST(FirewallAcl, NoRulesClassifiesEverythingAsNoMatch) {
    std::string error;
    auto t = dp::EgressFirewallTable::build(nullptr, 0, 1, &error);
    ASSERT_TRUE(t) << error;
    EXPECT_EQ(classify(*t, 1, {ip("192.0.2.1"), IPPROTO_TCP, 80}), 0u);
    EXPECT_EQ(classify(*t, 1, {ip("2001:db8::1"), IPPROTO_TCP, 80}), 0u);
}

TEST(FirewallAcl, RuleOutOfRangeIsRefusedWithAReason) {
    dp::FirewallAclRule r;
    r.firewall = 1;
    r.prefix_len = 33;
    std::string error;
    EXPECT_FALSE(dp::EgressFirewallTable::build(&r, 1, 1, &error));
    EXPECT_EQ(error, "EgressFirewall: ACL rule 0 (firewall 1, rule 0) is out of range");
}

namespace {

// "n<i>.example". Built by appending: gcc 12 warns (-Wrestrict, falsely) on "n" + to_string(i) + ...
std::string name(size_t i) {
    std::string s = "n";
    s += std::to_string(i);
    s += ".example";
    return s;
}

// Random rules over a few overlapping address blocks of each family, so that rules shadow each
// other and flows hit several at once; a handful of ports so that port rules collide too.
struct RandomWorld {
    std::mt19937 rng;
    explicit RandomWorld(uint32_t seed) : rng(seed) {}

    uint32_t below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); }

    IpAddr address(bool v6) {
        std::array<uint8_t, 16> b{};
        if (!v6) {
            // 10.0.0.0/14, with the last two bytes from a small set so that hosts repeat.
            b = {10, static_cast<uint8_t>(below(4)), static_cast<uint8_t>(below(4)), static_cast<uint8_t>(below(8))};
            return IpAddr::from_v4(static_cast<uint32_t>(b[0]) << 24 | b[1] << 16 | b[2] << 8 | b[3]);
        }
        b = {0x20, 0x01, 0x0d, 0xb8};
        b[4] = static_cast<uint8_t>(below(3));
        b[8] = static_cast<uint8_t>(below(3));
        b[15] = static_cast<uint8_t>(below(4));
        return IpAddr::from_v6(b.data());
    }

    IpPrefix prefix(bool v6) {
        const uint8_t lens4[] = {0, 8, 14, 15, 16, 22, 24, 29, 30, 32};
        const uint8_t lens6[] = {0, 32, 35, 40, 64, 66, 72, 127, 128};
        const uint8_t len = v6 ? lens6[below(sizeof lens6)] : lens4[below(sizeof lens4)];
        IpPrefix p{address(v6), len};
        return IpPrefix{p.network(), len};
    }

    uint8_t protocol() {
        const uint8_t p[] = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP};
        return p[below(4)];
    }

    uint16_t port() {
        const uint16_t p[] = {0, 53, 80, 443, 65535};
        return p[below(5)];
    }

    FirewallRule rule(size_t names) {
        FirewallRule r;
        r.action = below(2) ? FirewallAction::deny : FirewallAction::allow;
        const uint32_t kind = below(10);
        if (kind < 7)
            r.to = prefix(below(2) == 1);
        else if (kind < 9)
            r.to = model::FirewallDnsName{name(below(static_cast<uint32_t>(names))), false};
        else
            r.to = model::LabelSelector{{{"zone", below(2) ? "a" : "b"}}, {}};
        const uint32_t nports = below(4) == 0 ? 1 + below(3) : 0;
        for (uint32_t i = 0; i < nports; ++i) {
            const uint8_t proto = protocol();
            if (proto != IPPROTO_ICMP) r.ports.push_back({proto, port()});
        }
        return r;
    }

    FirewallFlow flow() {
        const uint8_t proto = protocol();
        return FirewallFlow{address(below(2) == 1), proto, proto == IPPROTO_ICMP ? uint16_t{0} : port()};
    }
};

}  // namespace

// rte_acl's verdict and rule index equal the model's first-match evaluation for every flow.
TEST(FirewallAcl, DifferentialAgainstTheModel) {
    size_t compared = 0, matched = 0;
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        RandomWorld w(seed);
        // Half the names resolve, to one or two addresses of either family.
        const size_t names = 6;
        std::map<std::string, std::vector<IpAddr>> dns;
        for (size_t i = 0; i < names; i += 2)
            dns[name(i)] = {w.address(w.below(2) == 1), w.address(w.below(2) == 1)};
        std::map<std::string, model::Node> nodes;
        for (const char* zone : {"a", "b"}) {
            model::Node n;
            n.meta.name = std::string("node-") + zone;
            n.meta.labels = {{"zone", zone}};
            n.internal_ips = {net::to_string(w.address(false)), net::to_string(w.address(true))};
            nodes[n.meta.name] = n;
        }
        const uint32_t n_namespaces = 1 + w.below(4);
        std::vector<std::vector<FirewallRule>> rules(n_namespaces);
        std::vector<firewall::NamespaceFirewall> ns;
        for (uint32_t n = 0; n < n_namespaces; ++n) {
            const uint32_t count = w.below(120);
            for (uint32_t i = 0; i < count; ++i)
                rules[n].push_back(w.rule(names));
        }
        for (uint32_t n = 0; n < n_namespaces; ++n)
            ns.push_back({"ns" + std::to_string(n), &rules[n], model::resolve_egress_firewall(rules[n], dns, nodes)});
        auto t = build(ns, seed);
        ASSERT_TRUE(t) << "seed " << seed;
        for (int i = 0; i < 3000; ++i) {
            const uint32_t id = 1 + w.below(n_namespaces + 1);  // the last id has no firewall
            const FirewallFlow f = w.flow();
            const FirewallVerdict want = id <= n_namespaces
                                             ? model::evaluate_egress_firewall(rules[id - 1], ns[id - 1].resolution, f)
                                             : FirewallVerdict{};
            const FirewallVerdict got = verdict_of(classify(*t, id, f));
            ASSERT_EQ(got, want) << "seed " << seed << " flow " << i << ": firewall " << id << " to "
                                 << net::to_string(f.dst) << " proto " << int(f.protocol) << " port " << f.dst_port;
            ++compared;
            matched += want.rule.has_value();
        }
    }
    // The generator must make rules decide often, or the comparison says little.
    EXPECT_GT(matched, compared / 3) << matched << " of " << compared << " flows matched a rule";
    std::printf("differential: %zu flows compared, %zu decided by a rule\n", compared, matched);
}

// Host i of 10.0.0.0/8, spread by a multiplicative hash so that the rules are not one block.
uint32_t spread_host(uint32_t i) {
    return 10u << 24 | ((i * 2654435761u) & 0xffffff);
}

// This thread's CPU time in ms: on a loaded machine the wall clock also counts other processes.
double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// One namespace at the limit of 8,000 rules: the publication cost and the classify cost per flow.
TEST(FirewallAcl, EightThousandRulesBuildAndClassifyCost) {
    RandomWorld w(4242);
    std::vector<FirewallRule> rules;
    for (size_t i = 0; i < model::kMaxEgressFirewallRules; ++i) {
        FirewallRule r;
        r.action = i % 2 ? FirewallAction::deny : FirewallAction::allow;
        // Distinct /32s and /24s across 10.0.0.0/8 and a tenth IPv6, a quarter with a port.
        const uint32_t host = spread_host(static_cast<uint32_t>(i));
        if (i % 10 == 9) {
            std::array<uint8_t, 16> b{
                0x20, 0x01, 0x0d, 0xb8, 0, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
            r.to = IpPrefix{IpAddr::from_v6(b.data()), 64};
        } else {
            const uint8_t len = i % 3 ? 32 : 24;
            r.to = IpPrefix{IpPrefix::from_v4(host, len).network(), len};
        }
        if (i % 4 == 0) r.ports = {{IPPROTO_TCP, static_cast<uint16_t>(1 + i % 1024)}};
        rules.push_back(std::move(r));
    }
    std::vector<firewall::NamespaceFirewall> ns = {{"big", &rules, model::resolve_egress_firewall(rules, {}, {})}};

    const double cpu0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<dp::FirewallAclRule> acl = firewall::expand_acl_rules(ns);
    std::string error;
    auto t = dp::EgressFirewallTable::build(acl.data(), acl.size(), 1, &error);
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = thread_cpu_ms();
    ASSERT_TRUE(t) << error;

    // Bursts of 32 IPv4 flows, to hosts the rules name and to others.
    constexpr uint32_t kBurst = 32;
    constexpr uint32_t kKeys = 4096;
    std::vector<dp::FirewallKey4> keys(kKeys);
    std::vector<model::FirewallFlow> flows(kKeys);
    for (uint32_t i = 0; i < kKeys; ++i) {
        // Rule i's host, or the next address (inside rule i's /24 when it has one).
        const uint32_t host = spread_host(i) + (i % 2);
        flows[i] = {IpAddr::from_v4(host), IPPROTO_TCP, static_cast<uint16_t>(1 + i % 1024)};
        keys[i] = dp::FirewallKey4{};
        keys[i].protocol = IPPROTO_TCP;
        keys[i].firewall_be = htonl(1);
        keys[i].dst_be = htonl(host);
        keys[i].dst_port_be = htons(flows[i].dst_port);
    }
    std::vector<const dp::FirewallKey4*> ptrs(kKeys);
    for (uint32_t i = 0; i < kKeys; ++i)
        ptrs[i] = &keys[i];
    std::vector<uint32_t> results(kKeys);
    constexpr int kRounds = 100;
    const double cpu2 = thread_cpu_ms();
    const auto t2 = std::chrono::steady_clock::now();
    for (int r = 0; r < kRounds; ++r) {
        for (uint32_t i = 0; i < kKeys; i += kBurst)
            t->classify4(&ptrs[i], &results[i], kBurst);
    }
    const auto t3 = std::chrono::steady_clock::now();
    const double cpu3 = thread_cpu_ms();

    // What was timed answers correctly.
    size_t decided = 0;
    for (uint32_t i = 0; i < kKeys; ++i) {
        ASSERT_EQ(verdict_of(results[i]), model::evaluate_egress_firewall(rules, ns[0].resolution, flows[i])) << i;
        decided += dp::firewall_matched(results[i]);
    }
    EXPECT_GT(decided, 0u);
    const double build_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double ns_per_flow = std::chrono::duration<double, std::nano>(t3 - t2).count() / (double(kKeys) * kRounds);
    const double cpu_ns_per_flow = (cpu3 - cpu2) * 1e6 / (double(kKeys) * kRounds);
    std::printf(
        "8000 rules (%zu IPv4 + %zu IPv6 ACL rules): expand + build %.1f ms (CPU %.1f ms); classify %.1f ns "
        "per flow (CPU %.1f ns) in bursts of %u (%zu of %u flows decided by a rule)\n",
        t->rules4(), t->rules6(), build_ms, cpu1 - cpu0, ns_per_flow, cpu_ns_per_flow, kBurst, decided, kKeys);
}
