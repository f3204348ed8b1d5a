// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the DNSNameResolver parser (control/dns/dns_name_resolver.h) on JSON text, then the
// accepted object mapped to the addresses its name stands for, as the wildcard rules will read it.
//
// Invariants: a bad object comes back as a DnsNameResolverError and nothing else; accepted names
// are lower case without a final dot; the mapping has exactly the object's name, its addresses
// sorted, each once, each one that a resolved name matching the object's name listed.
#include <algorithm>
#include <string>

#include "control/dns/dns_name_resolver.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace egw::dns;

void check_name(const std::string& n) {
    if (n.empty() || n.back() == '.') egw::fuzz::fail("a DNS name not normalized: " + n);
    if (std::any_of(n.begin(), n.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
        egw::fuzz::fail("a DNS name not lower-cased: " + n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
    DnsNameResolver r;
    try {
        r = parse_dns_name_resolver(j);
    } catch (const DnsNameResolverError&) {
        return 0;
    }
    check_name(r.dns_name);
    for (const ResolvedName& n : r.resolved)
        check_name(n.dns_name);

    const auto m = dns_name_resolver_addresses({r});
    if (m.size() != 1 || m.begin()->first != r.dns_name) egw::fuzz::fail("the mapping is not keyed by spec.name");
    const auto& addrs = m.begin()->second;
    if (!std::is_sorted(addrs.begin(), addrs.end()) || std::adjacent_find(addrs.begin(), addrs.end()) != addrs.end())
        egw::fuzz::fail("the addresses are not sorted and unique");
    for (const auto& a : addrs) {
        bool listed = false;
        for (const ResolvedName& n : r.resolved)
            if (dns_name_matches(r.dns_name, n.dns_name))
                for (const ResolverAddress& ra : n.addresses)
                    listed = listed || ra.ip == a;
        if (!listed) egw::fuzz::fail("an address no matching name listed: " + egw::net::to_string(a));
    }
    return 0;
}
