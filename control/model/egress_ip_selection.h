// SPDX-License-Identifier: Apache-2.0
//
// Which pods each EgressIP selects (docs/kubernetes.md, "EgressIP"): the pods of the namespaces
// its namespaceSelector matches that its podSelector also matches, as upstream's EgressIP does.
// A pod selects nothing while it is Succeeded or Failed, has no address yet, or is on the host's
// network (its addresses are the node's).
//
// The selection keeps only its results (and which EgressIPs match each namespace); the objects
// stay in the ObjectSet it is handed on every call, which must hold the change already. A change
// of one pod costs a look at each EgressIP whose namespaces hold it; of a namespace, a walk over that namespace's pods
// for each EgressIP; of an EgressIP, a walk over the pods of the namespaces it matches. Not thread-safe: its owner
// serialises the calls.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/ip.h"
#include "control/model/objects.h"

namespace egw::model {

// Whether a pod, whatever its labels, can be selected (phase, addresses, host network).
bool pod_selectable(const Pod& pod);

struct EgressIPSelected {
    std::set<std::string> namespaces;                      // matched by namespaceSelector
    std::map<std::string, std::vector<net::IpAddr>> pods;  // "namespace/name" -> its addresses
    bool operator==(const EgressIPSelected&) const = default;
};

class EgressIPSelection {
public:
    // Brings the selection in line with `objects` after the object (kind, key) changed or went
    // away; returns the names of the EgressIPs whose selection changed, sorted. Kinds other than
    // EgressIP, Namespace and Pod change nothing.
    std::vector<std::string> apply(const ObjectSet& objects, Kind kind, const std::string& key);
    // Forgets everything and selects afresh from `objects` (after a relist, or for the files
    // source); returns the EgressIPs whose selection differs from before, sorted.
    std::vector<std::string> rebuild(const ObjectSet& objects);

    // The selection of one EgressIP; nullptr when there is no such EgressIP.
    const EgressIPSelected* find(const std::string& egress_ip) const;
    // Every address the EgressIP selects, sorted, each once (empty when there is none).
    std::vector<net::IpAddr> selected_ips(const std::string& egress_ip) const;
    const std::map<std::string, EgressIPSelected>& all() const { return selected_; }

private:
    EgressIPSelected select(const ObjectSet& objects, const EgressIP& eip) const;
    bool on_egress_ip(const ObjectSet& objects, const std::string& name);
    void on_namespace(const ObjectSet& objects, const std::string& ns, std::vector<std::string>& changed);
    void on_pod(const ObjectSet& objects, const std::string& key, std::vector<std::string>& changed);

    // Index namespace -> EgressIPs matching it and back into selected_[...].namespaces.
    void match(const std::string& ns, const std::string& egress_ip);
    void unmatch(const std::string& ns, const std::string& egress_ip);

    std::map<std::string, EgressIPSelected> selected_;  // by EgressIP name
    // The EgressIPs whose namespaceSelector matches each namespace: a pod's change looks at these
    // only, not at every EgressIP.
    std::map<std::string, std::set<std::string>> by_namespace_;
};

}  // namespace egw::model
