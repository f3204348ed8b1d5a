// SPDX-License-Identifier: Apache-2.0
//
// See gateway_facts.h.
#include "control/k8s_source/gateway_facts.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace egw::k8s_source {

namespace {

// A prefix with its host bits cleared.
net::IpPrefix network_of(const net::IpPrefix& p) {
    return net::IpPrefix{p.network(), p.len};
}

void sort_unique(std::vector<net::IpPrefix>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

// At most this many subnets are read from one Lease: a gateway has at most 16 ports of 8
// addresses of each family, and a bigger list is not one egwd wrote.
constexpr size_t kMaxSubnets = 256;

}  // namespace

GatewayFacts gateway_facts(const std::vector<net::IpPrefix>& outside_prefixes, std::optional<size_t> capacity) {
    GatewayFacts f;
    for (const auto& p : outside_prefixes)
        f.subnets.push_back(network_of(p));
    sort_unique(f.subnets);
    f.capacity = capacity;
    return f;
}

std::map<std::string, std::string> encode_gateway_facts(const GatewayFacts& facts) {
    std::string subnets;
    for (const auto& p : facts.subnets) {
        if (!subnets.empty()) subnets += ',';
        subnets += net::to_string(p);
    }
    std::map<std::string, std::string> out{{kOutsideSubnetsAnnotation, subnets}};
    if (facts.capacity) out[kEgressIPCapacityAnnotation] = std::to_string(*facts.capacity);
    return out;
}

DecodedGatewayFacts decode_gateway_facts(const std::map<std::string, std::string>& annotations) {
    DecodedGatewayFacts out;
    auto fail = [&out](const char* key, const std::string& expected, const std::string& got) {
        out.facts = GatewayFacts{};
        out.facts.capacity = 0;
        // Only the start of a long value: it goes into log lines.
        const std::string shown = got.size() > 80 ? got.substr(0, 80) + "..." : got;
        out.error = std::string("annotation ") + key + ": expected " + expected + ", got \"" + shown + "\"";
        return out;
    };
    if (auto it = annotations.find(kEgressIPCapacityAnnotation); it != annotations.end()) {
        const std::string& s = it->second;
        size_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size())
            return fail(kEgressIPCapacityAnnotation, "a count of addresses like \"12\"", s);
        out.facts.capacity = v;
    }
    if (auto it = annotations.find(kOutsideSubnetsAnnotation); it != annotations.end()) {
        static const std::string what = "comma-separated networks like \"10.1.0.0/24,2001:db8:1::/64\"";
        std::string_view rest = it->second;
        while (!rest.empty()) {
            size_t comma = rest.find(',');
            std::string_view one = rest.substr(0, comma);
            auto p = net::parse_prefix(one);
            if (!p || out.facts.subnets.size() >= kMaxSubnets) return fail(kOutsideSubnetsAnnotation, what, it->second);
            out.facts.subnets.push_back(network_of(*p));
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
            if (rest.empty()) return fail(kOutsideSubnetsAnnotation, what, it->second);  // a trailing comma
        }
        sort_unique(out.facts.subnets);
    }
    return out;
}

}  // namespace egw::k8s_source
