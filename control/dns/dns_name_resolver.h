// SPDX-License-Identifier: Apache-2.0
//
// network.openshift.io/v1alpha1 DNSNameResolver: how a cluster that runs CoreDNS with its
// ocp_dnsnameresolver plugin tells what a DNS name, wildcard or not, resolved to for the pods
// that asked. egw reads it for EgressFirewall's wildcard dnsName rules ("*.example.com": one more
// label), which no query can answer; OVN-Kubernetes does the same with --enable-dns-name-resolver.
//
// The object: spec.name, the name as written with a final dot ("*.example.com."), and
// status.resolvedNames[], one per name that matched, each {dnsName, resolvedAddresses[] {ip,
// ttlSeconds, lastLookupTime}, resolutionFailures}. The plugin adds addresses and refreshes their
// TTLs; it removes them itself once they expired and lookups keep failing, so every address in the
// status stands, as upstream takes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/ip.h"
#include "control/dns/name_table.h"

namespace egw::dns {

struct ResolverAddress {
    net::IpAddr ip;
    uint32_t ttl_seconds = 0;
    // Microseconds, not the clock's nanoseconds: metav1.Time allows years 0000-9999, beyond the
    // 292 years either side of 1970 that nanoseconds in 64 bits reach.
    std::chrono::sys_time<std::chrono::microseconds> last_lookup;
    bool operator==(const ResolverAddress&) const = default;
};

struct ResolvedName {
    std::string dns_name;  // lower case, no final dot
    std::vector<ResolverAddress> addresses;
    bool operator==(const ResolvedName&) const = default;
};

struct DnsNameResolver {
    std::string namespace_;
    std::string name;      // metadata.name
    std::string dns_name;  // spec.name: lower case, no final dot, "*." kept
    std::vector<ResolvedName> resolved;
    bool operator==(const DnsNameResolver&) const = default;
};

// Thrown by parse_dns_name_resolver: what() reads "<json path>: expected ..., got ...".
class DnsNameResolverError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Parses one object as the API server gives it. Strict about what egw reads: apiVersion and kind,
// metadata.name, spec.name (an RFC 1123 name with an optional "*." and final dot), and each
// resolved address (an IP address, a TTL from 0 to 2^31-1, an RFC 3339 time). A missing status is
// an object nothing resolved yet.
DnsNameResolver parse_dns_name_resolver(const nlohmann::json& j, const std::string& path = "$");

// "www.example.com" matches "*.example.com" (one label in place of the "*"), and every name
// matches itself. Both as DnsNameResolver keeps them.
bool dns_name_matches(std::string_view pattern, std::string_view name);

// The addresses each spec.name stands for now, keyed like EgressFirewall's dnsName (lower case,
// no final dot, "*." kept): every address of every resolved name that the spec name matches,
// sorted, each once. Several objects for one name (one per namespace) are merged.
std::map<std::string, std::vector<net::IpAddr>> dns_name_resolver_addresses(
    const std::vector<DnsNameResolver>& objects);

// A resolver snapshot in the same shape, so the owner can merge both sources into one map.
std::map<std::string, std::vector<net::IpAddr>> snapshot_addresses(const Snapshot& snapshot);

}  // namespace egw::dns
