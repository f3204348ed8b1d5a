// SPDX-License-Identifier: Apache-2.0
//
// EgressQoS parsing, selection and evaluation. See egress_qos.h.
#include "config/json_text.h"
#include "control/model/egress_qos.h"

#include <cctype>

#include "control/model/rules.h"

namespace egw::model {

using nlohmann::json;

namespace {

// The JSON path conventions of objects.cpp: identifiers as ".key", other keys quoted in brackets.
std::string qos_child(const std::string& path, const std::string& key) {
    bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
    for (char c : key)
        plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    return plain ? path + "." + key : path + "[" + json(key).dump() + "]";
}

std::string qos_element(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

// A value as an error quotes it: containers by their type, long strings cut.
std::string quoted(const json& v) {
    return json_text::quote_refused(v);
}

[[noreturn]] void wanted(const std::string& path, const std::string& what, const json& got) {
    throw ObjectError(path, "expected " + what + ", got " + quoted(got));
}

// A member that is present and not null (JSON null reads as absent, as everywhere in the model).
const json* member(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json& must_have(const json& obj, const char* key, const std::string& path) {
    const json* v = member(obj, key);
    if (!v) throw ObjectError(qos_child(path, key), "required field is missing");
    return *v;
}

const std::string& text_of(const json& v, const std::string& path) {
    if (!v.is_string()) wanted(path, "a string", v);
    return v.get_ref<const std::string&>();
}

QosRule parse_rule(const json& r, const std::string& path) {
    if (!r.is_object()) wanted(path, "an object", r);
    QosRule rule;
    const std::string dpath = qos_child(path, "dscp");
    const json& dscp = must_have(r, "dscp", path);
    if (!dscp.is_number_integer() || dscp.get<int64_t>() < 0 || dscp.get<int64_t>() > kMaxDscp)
        wanted(dpath, "an integer 0-63", dscp);
    rule.dscp = static_cast<uint8_t>(dscp.get<int64_t>());
    if (const json* cidr = member(r, "dstCIDR")) {
        const std::string cpath = qos_child(path, "dstCIDR");
        auto p = net::parse_prefix(text_of(*cidr, cpath));
        if (!p) wanted(cpath, "an IPv4 or IPv6 CIDR", *cidr);
        rule.dst = net::IpPrefix{p->network(), p->len};
    }
    if (const json* sel = member(r, "podSelector"))
        rule.pods = parse_label_selector(*sel, qos_child(path, "podSelector"));
    return rule;
}

}  // namespace

EgressQoS parse_egress_qos(const json& j, const std::string& path) {
    if (!j.is_object()) wanted(path, "a Kubernetes object", j);
    const std::string api_version = text_of(must_have(j, "apiVersion", path), qos_child(path, "apiVersion"));
    const std::string kind = text_of(must_have(j, "kind", path), qos_child(path, "kind"));
    if (kind != "EgressQoS")
        throw ObjectError(qos_child(path, "kind"), "expected \"EgressQoS\", got " + json(kind).dump());
    if (api_version != "k8s.ovn.org/v1")
        throw ObjectError(qos_child(path, "apiVersion"),
                          "expected \"k8s.ovn.org/v1\" for kind EgressQoS, got " + json(api_version).dump());

    EgressQoS qos;
    const std::string mpath = qos_child(path, "metadata");
    const json& m = must_have(j, "metadata", path);
    if (!m.is_object()) wanted(mpath, "an object", m);
    qos.meta.name = text_of(must_have(m, "name", mpath), qos_child(mpath, "name"));
    if (qos.meta.name.empty()) throw ObjectError(qos_child(mpath, "name"), "must not be empty");
    if (const json* ns = member(m, "namespace")) qos.meta.namespace_ = text_of(*ns, qos_child(mpath, "namespace"));
    if (const json* uid = member(m, "uid")) qos.meta.uid = text_of(*uid, qos_child(mpath, "uid"));
    if (const json* rv = member(m, "resourceVersion"))
        qos.meta.resource_version = text_of(*rv, qos_child(mpath, "resourceVersion"));

    const std::string spath = qos_child(path, "spec");
    const json& spec = must_have(j, "spec", path);
    if (!spec.is_object()) wanted(spath, "an object", spec);
    const std::string epath = qos_child(spath, "egress");
    const json& egress = must_have(spec, "egress", spath);
    if (!egress.is_array()) wanted(epath, "an array", egress);
    qos.rules.reserve(egress.size());
    for (size_t i = 0; i < egress.size(); ++i)
        qos.rules.push_back(parse_rule(egress[i], qos_element(epath, i)));
    return qos;
}

EgressQosSelection select_egress_qos(const std::map<std::string, EgressQoS>& objects) {
    EgressQosSelection out;
    for (const auto& [key, qos] : objects) {
        if (qos.meta.name != kEgressQosName)
            out.ignored.push_back(key + ": ignored: only the EgressQoS named \"default\" applies in a namespace");
        else
            out.by_namespace[qos.meta.namespace_] = &qos;
    }
    return out;
}

std::vector<PodQosRule> rules_for_pod(const std::vector<QosRule>& rules,
                                      const std::map<std::string, std::string>& pod_labels) {
    std::vector<PodQosRule> out;
    for (const QosRule& r : rules) {
        if (selector_matches(r.pods, pod_labels)) out.push_back(PodQosRule{r.dst, r.dscp});
    }
    return out;
}

std::optional<uint8_t> pod_dscp(const std::vector<PodQosRule>& rules, const net::IpAddr& dst) {
    for (const PodQosRule& r : rules) {
        if (!r.dst || r.dst->contains(dst)) return r.dscp;
    }
    return std::nullopt;
}

std::optional<uint8_t> egress_qos_dscp(const EgressQosSelection& selection, const std::string& pod_namespace,
                                       const std::map<std::string, std::string>& pod_labels, const net::IpAddr& dst) {
    auto it = selection.by_namespace.find(pod_namespace);
    if (it == selection.by_namespace.end()) return std::nullopt;
    for (const QosRule& r : it->second->rules) {
        if ((!r.dst || r.dst->contains(dst)) && selector_matches(r.pods, pod_labels)) return r.dscp;
    }
    return std::nullopt;
}

}  // namespace egw::model
