// SPDX-License-Identifier: Apache-2.0
//
// The EgressFirewall families (control/metrics/egress_firewall.h): one series per namespace with
// its exact counts, HELP and TYPE once each, and the bound on the series: namespaces past
// kMaxFirewallNamespaceSeries summed under namespace="".
#include "control/metrics/egress_firewall.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

namespace {

using namespace egw::metrics;

std::string render(const std::vector<FirewallNamespaceCounts>& ns) {
    std::string out;
    Writer w(out);
    write_egress_firewall(w, ns);
    EXPECT_EQ(w.error(), "");
    return out;
}

size_t lines_starting(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
        n += line.rfind(prefix, 0) == 0;
    return n;
}

TEST(EgressFirewallFamilies, OneSeriesPerNamespaceWithItsCounts) {
    std::string text = render({{"db", 2, 7, 3}, {"shop", 0, 41, 1}});
    EXPECT_NE(text.find("egw_egress_firewall_denied_total{namespace=\"db\"} 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("egw_egress_firewall_allowed_total{namespace=\"db\"} 7\n"), std::string::npos) << text;
    EXPECT_NE(text.find("egw_egress_firewall_rules{namespace=\"db\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("egw_egress_firewall_allowed_total{namespace=\"shop\"} 41\n"), std::string::npos) << text;
    EXPECT_EQ(lines_starting(text, "# TYPE egw_egress_firewall_denied_total counter"), 1u);
    EXPECT_EQ(lines_starting(text, "# TYPE egw_egress_firewall_rules gauge"), 1u);
    EXPECT_EQ(lines_starting(text, "egw_egress_firewall_"), 6u);
}

TEST(EgressFirewallFamilies, NoFirewallWritesTheFamiliesWithoutSeries) {
    std::string text = render({});
    EXPECT_EQ(lines_starting(text, "# HELP egw_egress_firewall_"), 3u);
    EXPECT_EQ(lines_starting(text, "egw_egress_firewall_"), 0u);
}

TEST(EgressFirewallFamilies, NamespacesPastTheBoundAreSummedUnderAnEmptyLabel) {
    std::vector<FirewallNamespaceCounts> ns;
    for (size_t i = 0; i < kMaxFirewallNamespaceSeries + 5; ++i) {
        char name[16];
        std::snprintf(name, sizeof name, "ns-%05zu", i);
        ns.push_back({name, 1, 2, 3});
    }
    std::string text = render(ns);
    EXPECT_EQ(lines_starting(text, "egw_egress_firewall_denied_total{"), kMaxFirewallNamespaceSeries + 1);
    EXPECT_NE(text.find("egw_egress_firewall_denied_total{namespace=\"\"} 5\n"), std::string::npos);
    EXPECT_NE(text.find("egw_egress_firewall_rules{namespace=\"\"} 15\n"), std::string::npos);
}

}  // namespace
