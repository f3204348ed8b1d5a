// SPDX-License-Identifier: Apache-2.0
//
// egw's own command table (control/cli/commands.cpp) through the grammar engine: every command
// of docs/cli.md parses, bad input is named, live names complete. Live names come from a fake;
// no handler runs here (tests/e2e/test_cli.py runs them against a real egwd).
#include <gtest/gtest.h>

#include <set>

#include "control/cli/cli.h"
#include "tests/unit/cli/fake_names.h"

using namespace egw::cli;
using egw::test::FakeNames;

namespace {

// The pattern of `show sessions` and its filters.
constexpr std::string_view kSessions =
    "show sessions [service SERVICE] [saddr IP] [daddr IP] [sport L4PORT] [dport L4PORT] [proto PROTO] [limit N]";

constexpr std::string_view kTraceStart =
    "trace start [N] [port PORT] [saddr IP] [daddr IP] [sport L4PORT] [dport L4PORT] [proto PROTO]";

class CommandsTest : public ::testing::Test {
protected:
    CommandsTest() : g(egw_grammar()) {
        names.sets[NameSet::ports] = {"0", "pods", "1", "ext1"};
        names.sets[NameSet::services] = {"default/db", "default/web", "shop/cart"};
        names.sets[NameSet::namespaces] = {"default", "shop"};
        names.sets[NameSet::vrfs] = {"default", "254", "blue", "100"};
    }
    // The pattern of the command `line` parses to ("" on error), remembered in `parsed`.
    std::string pattern(std::string_view line) {
        auto r = g.parse(line, names);
        if (!r.command) return "";
        parsed.insert(std::string(r.command->pattern));
        return std::string(r.command->pattern);
    }
    ParseResult parse(std::string_view line) { return g.parse(line, names); }
    std::vector<std::string> candidates(std::string_view line) { return g.complete(line, names).candidates; }

    const Grammar& g;
    FakeNames names;
    std::set<std::string> parsed;
};

TEST_F(CommandsTest, TableIsWellFormed) {
    std::set<std::string_view> sections;
    for (const auto& s : g.sections())
        sections.insert(s.name);
    for (const auto& c : g.commands()) {
        SCOPED_TRACE(std::string(c.pattern));
        std::string verb(c.pattern.substr(0, c.pattern.find(' ')));
        EXPECT_TRUE(verb == "show" || verb == "set" || verb == "clear" || verb == "reload" || verb == "help" ||
                    verb == "quit" || verb == "trace")
            << verb;
        EXPECT_NE(c.handler, nullptr);
        EXPECT_FALSE(c.help.empty());
        EXPECT_TRUE(sections.count(c.section));
    }
    for (const auto& s : g.sections())
        EXPECT_NE(g.help(s.name), "") << s.name;
}

TEST_F(CommandsTest, EveryCommandParses) {
    EXPECT_EQ(pattern("show port stats all"), "show port stats PORTS");
    EXPECT_EQ(pattern("show port stats 1"), "show port stats PORTS");
    EXPECT_EQ(pattern("show port stats pods"), "show port stats PORTS");
    EXPECT_EQ(pattern("show port xstats ext1"), "show port xstats PORT");
    EXPECT_EQ(pattern("show vlans"), "show vlans");
    EXPECT_EQ(pattern("clear port stats all"), "clear port stats PORTS");
    EXPECT_EQ(pattern("show services"), "show services [namespace NS]");
    EXPECT_EQ(pattern("show services namespace kube-system"), "show services [namespace NS]");
    EXPECT_EQ(pattern("show service shop/cart"), "show service SERVICE");
    EXPECT_EQ(pattern("show service other/not-known-yet"), "show service SERVICE") << "existence is the handler's";
    EXPECT_EQ(pattern("show egressqos"), "show egressqos [namespace NS]");
    EXPECT_EQ(pattern("show egressqos namespace web"), "show egressqos [namespace NS]");
    EXPECT_EQ(pattern("show sessions"), kSessions);
    EXPECT_EQ(pattern("show sessions limit 5 proto tcp dport 443 sport 1 daddr 1.2.3.4 saddr 10.0.0.1 service "
                      "default/web"),
              kSessions);
    EXPECT_EQ(pattern("show snat pools"), "show snat pools");
    EXPECT_EQ(pattern("clear sessions service default/web"), "clear sessions service SERVICE");
    EXPECT_EQ(pattern("clear sessions all"), "clear sessions all");
    // What testpmd and vppctl users type: prefixes, and the new commands.
    EXPECT_EQ(pattern("sh serv"), "show services [namespace NS]");
    EXPECT_EQ(pattern("sh ser default/web"), "show service SERVICE");
    EXPECT_EQ(pattern("sh po in all"), "show port info PORTS");
    EXPECT_EQ(pattern("show version"), "show version");
    EXPECT_EQ(pattern("cl co"), "clear counters");
    EXPECT_EQ(pattern("sh sess pro udp lim 5"), kSessions);
    EXPECT_EQ(pattern("s services"), "show services [namespace NS]");  // "set services" is no command
    EXPECT_EQ(parse("s log level info").error, "");
    EXPECT_EQ(parse("show se").error, "ambiguous \"se\" after \"show\": service, services, sessions");
    EXPECT_EQ(pattern("show vrfs"), "show vrfs");
    EXPECT_EQ(pattern("show routes vrf blue"), "show routes vrf VRF");
    EXPECT_EQ(pattern("show routes vrf 100"), "show routes vrf VRF");
    EXPECT_EQ(pattern("show neighbors"), "show neighbors");
    EXPECT_EQ(pattern("show lcores"), "show lcores");
    EXPECT_EQ(pattern("show drops"), "show drops");
    EXPECT_EQ(pattern("show config"), "show config");
    EXPECT_EQ(pattern("show port info 0"), "show port info PORTS");
    EXPECT_EQ(pattern("show steering"), "show steering");
    EXPECT_EQ(pattern("show arp"), "show arp");
    EXPECT_EQ(pattern("show k8s"), "show k8s");
    EXPECT_EQ(pattern("show egressips"), "show egressips");
    EXPECT_EQ(pattern("show sync"), "show sync");
    EXPECT_EQ(pattern("show egressfirewall"), "show egressfirewall [NS]");
    EXPECT_EQ(pattern("sh egressf shop"), "show egressfirewall [NS]");
    EXPECT_EQ(pattern("show icmp"), "show icmp");
    EXPECT_EQ(pattern("reload config"), "reload config");
    EXPECT_EQ(pattern("set log level warn"), "set log level LEVEL");
    EXPECT_EQ(pattern("help"), "help [SECTION]");
    EXPECT_EQ(pattern("help sessions"), "help [SECTION]");
    EXPECT_EQ(pattern("help all"), "help [SECTION]");
    EXPECT_EQ(pattern("quit"), "quit");
    EXPECT_EQ(pattern("trace start"), kTraceStart);
    EXPECT_EQ(pattern("trace start 10 port ext1 proto udp"), kTraceStart);
    EXPECT_EQ(pattern("show trace"), "show trace");
    EXPECT_EQ(pattern("trace stop"), "trace stop");
    // Each command of the table was parsed to above: a command added to it needs a line here.
    for (const auto& c : g.commands())
        EXPECT_TRUE(parsed.count(std::string(c.pattern))) << "no line above parses to \"" << c.pattern << "\"";
}

TEST_F(CommandsTest, SessionFiltersAreKeyedByKeyword) {
    auto r = parse("show sessions dport 443 service default/web saddr 10.244.1.10 proto tcp limit 7 --json");
    ASSERT_NE(r.command, nullptr) << r.error;
    EXPECT_TRUE(r.json);
    EXPECT_EQ(r.args.get("service"), "default/web");
    EXPECT_EQ(r.args.get("saddr"), "10.244.1.10");
    EXPECT_EQ(r.args.get("dport"), "443");
    EXPECT_EQ(r.args.get("proto"), "tcp");
    EXPECT_EQ(r.args.get("limit"), "7");
    EXPECT_FALSE(r.args.has("daddr"));
    EXPECT_FALSE(r.args.has("sport"));
}

// The trace's filters are show sessions' words; its count stands alone, as vppctl's `trace add`.
TEST_F(CommandsTest, TraceStartTakesACountAndTheSessionFilters) {
    auto r = parse("trace start 20 dport 443 saddr fd00:10:244:1::10 proto tcp port pods --json");
    ASSERT_NE(r.command, nullptr) << r.error;
    EXPECT_TRUE(r.json);
    EXPECT_EQ(r.args.get("N"), "20");
    EXPECT_EQ(r.args.get("dport"), "443");
    EXPECT_EQ(r.args.get("saddr"), "fd00:10:244:1::10");
    EXPECT_EQ(r.args.get("proto"), "tcp");
    EXPECT_EQ(r.args.get("port"), "pods");
    EXPECT_FALSE(r.args.has("daddr"));
    auto bare = parse("trace start");
    ASSERT_NE(bare.command, nullptr) << bare.error;
    EXPECT_FALSE(bare.args.has("N"));
    for (const char* line : {"trace start 0", "trace start port nowhere", "trace start sport 65536",
                             "trace start daddr 10.0.0", "trace start proto sctp", "trace", "trace go"})
        EXPECT_EQ(parse(line).command, nullptr) << line;
    EXPECT_EQ(pattern("tr st 5"), kTraceStart);
    EXPECT_EQ(pattern("sh tr"), "show trace");
}

TEST_F(CommandsTest, SessionAddressFiltersTakeBothFamilies) {
    auto r = parse("show sessions saddr fd00:10:244:1::10 daddr 2001:db8:2::100 proto icmpv6");
    ASSERT_NE(r.command, nullptr) << r.error;
    EXPECT_EQ(r.args.get("saddr"), "fd00:10:244:1::10");
    EXPECT_EQ(r.args.get("daddr"), "2001:db8:2::100");
    EXPECT_EQ(r.args.get("proto"), "icmpv6");
    // Every RFC 4291 form, an IPv4 tail too; an IPv4 address beside an IPv6 one parses (it
    // matches nothing, which is the handler's answer, not a syntax error).
    for (const char* line : {"show sessions saddr ::", "show sessions daddr 2001:DB8:0:0:0:0:0:1",
                             "show sessions saddr ::ffff:192.0.2.1", "show sessions saddr 10.0.0.1 daddr 2001:db8::1"})
        EXPECT_NE(parse(line).command, nullptr) << line << ": " << parse(line).error;
    EXPECT_EQ(pattern("sh sess pro icmpv6"), kSessions);
    EXPECT_EQ(parse("show sessions proto icmp").args.get("proto"), "icmp") << "typed in full, not a prefix";
    // Prefixes, zones, brackets and ports are not addresses.
    for (const char* line :
         {"show sessions saddr fd00::/64", "show sessions saddr fe80::1%eth0", "show sessions saddr [2001:db8::1]",
          "show sessions daddr [2001:db8::1]:80", "show sessions saddr 2001:db8:::1",
          "show sessions saddr 1:2:3:4:5:6:7:8:9", "show sessions daddr 10.0.0.1/32"}) {
        auto bad = parse(line);
        EXPECT_EQ(bad.command, nullptr) << line;
        EXPECT_NE(bad.error.find("bad IP"), std::string::npos) << line << ": " << bad.error;
    }
    EXPECT_EQ(g.complete("show sessions daddr ", names).hints,
              (std::vector<std::string>{"IP: an IPv4 or IPv6 address"}));
}

TEST_F(CommandsTest, ArgumentsAreChecked) {
    const char* bad[] = {
        "show port stats 7",          "show port stats ext9",
        "show port xstats all",       "show services namespace Bad_NS",
        "show service web",           "show service a/b/c",
        "show sessions saddr 10.0.0", "show sessions saddr 10.0.0.256",
        "show sessions sport 65536",  "show sessions sport -1",
        "show sessions proto sctp",   "show sessions limit 0",
        "show sessions limit 00",     "show sessions limit 1000000001",
        "show sessions limit ten",    "show routes vrf green",
        "set log level loud",         "help nope",
        "clear sessions service web", "clear sessions",
        "show sessions service",
    };
    for (const char* line : bad) {
        auto r = parse(line);
        EXPECT_EQ(r.command, nullptr) << line;
        EXPECT_FALSE(r.error.empty()) << line;
    }
    EXPECT_NE(pattern("show sessions limit 1000000000"), "");
    EXPECT_NE(pattern("show sessions sport 0 dport 65535"), "");
}

TEST_F(CommandsTest, MessagesNameTheOffendingWord) {
    EXPECT_EQ(parse("frobnicate").error,
              "unknown command \"frobnicate\": expected one of clear, help, quit, reload, set, show, trace (help lists "
              "them)");
    EXPECT_EQ(parse("show sessions limit 0").error,
              "bad N \"0\" after \"show sessions limit\": expected a number from 1 to 1000000000; usage: show sessions "
              "[service SERVICE] [saddr IP] [daddr IP] [sport L4PORT] [dport L4PORT] [proto PROTO] [limit N]");
    EXPECT_EQ(parse("show routes vrf green").error,
              "bad VRF \"green\" after \"show routes vrf\": expected a VRF name or routing table number (one of: 100, "
              "254, blue, default); usage: show routes vrf VRF");
    EXPECT_EQ(parse("clear sessions").error, "incomplete command \"clear sessions\": expected one of all, service");
}

TEST_F(CommandsTest, Completion) {
    EXPECT_EQ(candidates(""), (std::vector<std::string>{"clear", "help", "quit", "reload", "set", "show", "trace"}));
    EXPECT_EQ(candidates("show "),
              (std::vector<std::string>{
                  "arp",      "config",    "drops", "egressfirewall", "egressips", "egressqos", "icmp",     "k8s",
                  "lcores",   "neighbors", "port",  "routes",         "service",   "services",  "sessions", "snat",
                  "steering", "sync",      "trace", "version",        "vlans",     "vrfs"}));
    EXPECT_EQ(candidates("show port "), (std::vector<std::string>{"info", "stats", "xstats"}));
    EXPECT_EQ(candidates("clear "), (std::vector<std::string>{"counters", "port", "sessions"}));
    EXPECT_EQ(candidates("show service "), (std::vector<std::string>{"default/db", "default/web", "shop/cart"}));
    EXPECT_EQ(candidates("show services namespace "), (std::vector<std::string>{"default", "shop"}));
    EXPECT_EQ(candidates("show routes vrf "), (std::vector<std::string>{"100", "254", "blue", "default"}));
    EXPECT_EQ(candidates("show port xstats "), (std::vector<std::string>{"0", "1", "ext1", "pods"}));
    EXPECT_EQ(candidates("clear port stats a"), (std::vector<std::string>{"all"}));
    EXPECT_EQ(candidates("set log level "),
              (std::vector<std::string>{"critical", "debug", "error", "info", "off", "trace", "warn"}));
    EXPECT_EQ(candidates("help "),
              (std::vector<std::string>{"all", "ports", "routing", "services", "sessions", "system", "trace"}));
    EXPECT_EQ(candidates("trace "), (std::vector<std::string>{"start", "stop"}));
    EXPECT_EQ(candidates("trace start 5 proto udp "),
              (std::vector<std::string>{"daddr", "dport", "port", "saddr", "sport"}));
    EXPECT_EQ(candidates("show sessions proto udp "),
              (std::vector<std::string>{"daddr", "dport", "limit", "saddr", "service", "sport"}));
    EXPECT_EQ(candidates("clear sessions service default/w"), (std::vector<std::string>{"default/web"}));
    auto c = g.complete("show sessions limit ", names);
    EXPECT_TRUE(c.candidates.empty());
    EXPECT_EQ(c.hints, (std::vector<std::string>{"N: a number from 1 to 1000000000"}));
}

TEST_F(CommandsTest, HelpSectionsListTheirCommands) {
    EXPECT_NE(g.help("ports").find("show port xstats PORT"), std::string::npos);
    EXPECT_NE(g.help("services").find("show service SERVICE"), std::string::npos);
    EXPECT_NE(g.help("sessions").find("clear sessions service SERVICE"), std::string::npos);
    EXPECT_NE(g.help("routing").find("show routes vrf VRF"), std::string::npos);
    EXPECT_NE(g.help("system").find("set log level LEVEL"), std::string::npos);
    for (const auto& c : g.commands())
        EXPECT_NE(g.help("all").find("  " + std::string(c.pattern) + "\n"), std::string::npos) << c.pattern;
    // Every line of help fits a 100-column terminal except the long usage lines.
    std::string all = g.help("all");
    size_t start = 0;
    while (start < all.size()) {
        size_t nl = all.find('\n', start);
        std::string line = all.substr(start, nl - start);
        if (line.rfind("      ", 0) == 0) {
            EXPECT_LE(line.size(), 96u) << line;
        }
        start = nl + 1;
    }
}

}  // namespace
