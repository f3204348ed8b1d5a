// SPDX-License-Identifier: Apache-2.0
//
// The API resources egw talks to, and their URL paths.
#pragma once

#include <string>

namespace egw::k8s {

struct ResourceType {
    std::string group;    // "" for the core group
    std::string version;  // "v1"
    std::string plural;   // "nodes"
    std::string kind;     // "Node"
    bool namespaced = true;

    // "v1", "discovery.k8s.io/v1".
    std::string api_version() const { return group.empty() ? version : group + "/" + version; }
    // "/api/v1/nodes", "/apis/k8s.ovn.org/v1/namespaces/NS/egressservices" ("" = all namespaces).
    std::string collection_path(const std::string& ns = "") const;
    // ".../namespaces/NS/egressservices/NAME[/SUBRESOURCE]" (ns ignored for cluster-scoped kinds).
    std::string object_path(const std::string& ns, const std::string& name, const std::string& subresource = "") const;
};

namespace resources {
extern const ResourceType egress_services;   // k8s.ovn.org/v1 EgressService
extern const ResourceType services;          // v1 Service
extern const ResourceType endpoint_slices;   // discovery.k8s.io/v1 EndpointSlice
extern const ResourceType nodes;             // v1 Node
extern const ResourceType leases;            // coordination.k8s.io/v1 Lease
extern const ResourceType egress_ips;        // k8s.ovn.org/v1 EgressIP (cluster-scoped)
extern const ResourceType namespaces;        // v1 Namespace
extern const ResourceType pods;              // v1 Pod
extern const ResourceType egress_firewalls;  // k8s.ovn.org/v1 EgressFirewall (namespaced)
}  // namespace resources

}  // namespace egw::k8s
