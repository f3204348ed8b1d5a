// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/resources.h"

namespace egw::k8s {

std::string ResourceType::collection_path(const std::string& ns) const {
    std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
    if (namespaced && !ns.empty()) p += "/namespaces/" + ns;
    return p + "/" + plural;
}

std::string ResourceType::object_path(const std::string& ns, const std::string& name,
                                      const std::string& subresource) const {
    std::string p = collection_path(namespaced ? ns : "") + "/" + name;
    if (!subresource.empty()) p += "/" + subresource;
    return p;
}

namespace resources {
const ResourceType egress_services{"k8s.ovn.org", "v1", "egressservices", "EgressService", true};
const ResourceType services{"", "v1", "services", "Service", true};
const ResourceType endpoint_slices{"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true};
const ResourceType nodes{"", "v1", "nodes", "Node", false};
const ResourceType leases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceType egress_ips{"k8s.ovn.org", "v1", "egressips", "EgressIP", false};
const ResourceType namespaces{"", "v1", "namespaces", "Namespace", false};
const ResourceType pods{"", "v1", "pods", "Pod", true};
const ResourceType egress_firewalls{"k8s.ovn.org", "v1", "egressfirewalls", "EgressFirewall", true};
}  // namespace resources

}  // namespace egw::k8s
