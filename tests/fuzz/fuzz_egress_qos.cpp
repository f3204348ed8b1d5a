// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: the EgressQoS parser (control/model/egress_qos.h) on JSON text, then the rules it
// accepted evaluated for a few pods and destinations, both ways the control thread can.
//
// Invariants: a bad object comes back as an ObjectError and nothing else; an accepted object
// holds only what the parser promises (DSCP 0-63, CIDRs without host bits); the namespace-level
// answer and the per-pod table's answer agree, and a DSCP given is the first matching rule's.
#include <string>

#include "control/model/egress_qos.h"
#include "control/model/rules.h"
#include "tests/fuzz/fuzz.h"

namespace {

using namespace egw::model;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
    EgressQoS qos;
    try {
        qos = parse_egress_qos(j);
    } catch (const ObjectError&) {
        return 0;
    }
    for (const QosRule& r : qos.rules) {
        if (r.dscp > kMaxDscp) egw::fuzz::fail("a DSCP over 63: " + std::to_string(r.dscp));
        if (r.dst && r.dst->addr != r.dst->network())
            egw::fuzz::fail("a dstCIDR with host bits: " + egw::net::to_string(*r.dst));
    }

    std::map<std::string, EgressQoS> objects{{qos.meta.namespace_ + "/" + qos.meta.name, qos}};
    const EgressQosSelection sel = select_egress_qos(objects);
    if (sel.by_namespace.size() + sel.ignored.size() != 1) egw::fuzz::fail("an object neither selected nor ignored");

    // Pods labelled as the first rules' selectors ask, and one without labels.
    std::vector<std::map<std::string, std::string>> pods{{}};
    for (size_t i = 0; i < qos.rules.size() && i < 4; ++i)
        pods.push_back(qos.rules[i].pods.match_labels);
    for (const auto& labels : pods) {
        const std::vector<PodQosRule> table = rules_for_pod(qos.rules, labels);
        for (const char* dst : {"192.0.2.1", "10.0.0.1", "2001:db8::1", "::", "255.255.255.255"}) {
            const egw::net::IpAddr a = *egw::net::parse_ip(dst);
            const std::optional<uint8_t> by_ns = egress_qos_dscp(sel, qos.meta.namespace_, labels, a);
            if (sel.by_namespace.empty()) {
                if (by_ns) egw::fuzz::fail("an ignored object marked traffic");
                continue;
            }
            if (by_ns != pod_dscp(table, a)) egw::fuzz::fail("the per-pod table disagrees with the rules");
            std::optional<uint8_t> first;
            for (const QosRule& r : qos.rules) {
                if ((!r.dst || r.dst->contains(a)) && selector_matches(r.pods, labels)) {
                    first = r.dscp;
                    break;
                }
            }
            if (by_ns != first) egw::fuzz::fail("the DSCP is not the first matching rule's");
        }
    }
    return 0;
}
