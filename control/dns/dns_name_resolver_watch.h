// SPDX-License-Identifier: Apache-2.0
//
// The cluster's DNSNameResolver objects (dns_name_resolver.h), listed and watched with a
// k8s::Reflector of their own (bookmarks, relist on 410, backoff), and the addresses each name
// stands for, for EgressFirewall's wildcard dnsName rules.
//
// A cluster without the CRD (no DNSNameResolver feature), or RBAC without the resource, costs a
// failing reflector here, logged once per streak, and nothing else: the map stays empty and a
// wildcard rule matches nothing. An object the parser refuses is left out and logged once per
// version (with its JSON path); the rest still count.
//
// Threads: the reflector's thread updates the objects; addresses(), generation() and the other
// readers may be called from any thread (a mutex, control side only).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/dns/dns_name_resolver.h"
#include "control/k8s/reflector.h"

namespace egw::dns {

// network.openshift.io/v1alpha1 DNSNameResolver, namespaced.
extern const k8s::ResourceType kDnsNameResolvers;

class DnsNameResolverWatch : private k8s::ReflectorHandler {
public:
    // `namespace_` "" watches every namespace (OVN-Kubernetes keeps them in its own).
    DnsNameResolverWatch(std::shared_ptr<k8s::Transport> transport, std::string namespace_ = "",
                         k8s::ReflectorOptions opts = {});
    ~DnsNameResolverWatch() override;
    DnsNameResolverWatch(const DnsNameResolverWatch&) = delete;
    DnsNameResolverWatch& operator=(const DnsNameResolverWatch&) = delete;

    void start();
    void stop();  // returns once the reflector's thread has stopped

    // Moves whenever addresses() changes.
    uint64_t generation() const;
    // spec.name -> addresses (dns_name_resolver_addresses() of every accepted object).
    std::map<std::string, std::vector<net::IpAddr>> addresses() const;
    size_t objects() const;   // accepted
    size_t rejected() const;  // refused by the parser, in the current state
    bool synced() const { return reflector_.synced(); }
    k8s::ReflectorStatus status() const { return reflector_.status(); }

private:
    void replace(std::vector<nlohmann::json>&& items, const std::string& resource_version) override;
    void apply(k8s::EventType type, nlohmann::json&& object) override;
    // Parses and stores one object under `key`; called with mutex_ held.
    void store(const std::string& key, const nlohmann::json& object);
    // Recomputes the map and moves the generation when it changed; called with mutex_ held.
    void recompute();

    mutable std::mutex mutex_;
    std::map<std::string, DnsNameResolver> accepted_;  // "namespace/name"
    std::map<std::string, std::string> rejected_;      // "namespace/name" -> the resourceVersion logged
    std::map<std::string, std::vector<net::IpAddr>> addresses_;
    uint64_t generation_ = 0;
    k8s::Reflector reflector_;  // last: its thread calls the members above
};

}  // namespace egw::dns
