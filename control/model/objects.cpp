// SPDX-License-Identifier: Apache-2.0
//
// Parsing of the Kubernetes objects egw reads. See objects.h.
#include "config/json_text.h"
#include "control/model/objects.h"

#include <arpa/inet.h>

#include <array>
#include <initializer_list>
#include <cctype>
#include <utility>

#include "control/model/egress_firewall.h"
#include "control/model/rules.h"

namespace egw::model {

using nlohmann::json;

namespace {

struct KindInfo {
    Kind kind;
    const char* name;
    const char* api_version;
    bool namespaced;
};

constexpr std::array<KindInfo, 9> kKinds{{
    {Kind::egress_service, "EgressService", "k8s.ovn.org/v1", true},
    {Kind::service, "Service", "v1", true},
    {Kind::endpoint_slice, "EndpointSlice", "discovery.k8s.io/v1", true},
    {Kind::node, "Node", "v1", false},
    {Kind::lease, "Lease", "coordination.k8s.io/v1", true},
    {Kind::egress_ip, "EgressIP", "k8s.ovn.org/v1", false},
    {Kind::namespace_, "Namespace", "v1", false},
    {Kind::pod, "Pod", "v1", true},
    {Kind::egress_firewall, "EgressFirewall", "k8s.ovn.org/v1", true},
}};

const KindInfo& info(Kind k) {
    for (const auto& i : kKinds) {
        if (i.kind == k) return i;
    }
    return kKinds[0];  // unreachable: every enumerator is in the table
}

// ---- JSON paths and value descriptions for error messages ----

bool is_identifier(const std::string& key) {
    if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
    for (char c : key) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    return true;
}

std::string child(const std::string& path, const std::string& key) {
    if (is_identifier(key)) return path + "." + key;
    return path + "[" + json(key).dump() + "]";
}

std::string element(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

// How a value looks in a message: scalars as JSON text (long strings cut), containers by type.
std::string describe(const json& v) {
    return json_text::quote_refused(v);
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
    throw ObjectError(path, message);
}

[[noreturn]] void expected(const std::string& path, const std::string& what, const json& got) {
    std::string msg = "expected " + what + ", got " + describe(got);
    if (what == "a string" && (got.is_boolean() || got.is_number())) msg += " (quote it in YAML)";
    fail(path, msg);
}

// A field that is present and not null, or nullptr.
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

const json* object_field(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (v && !v->is_object()) expected(child(path, key), "an object", *v);
    return v;
}

const json* array_field(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (v && !v->is_array()) expected(child(path, key), "an array", *v);
    return v;
}

std::string string_value(const json& v, const std::string& path) {
    if (!v.is_string()) expected(path, "a string", v);
    return v.get<std::string>();
}

std::string string_field(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    return v ? string_value(*v, child(path, key)) : std::string{};
}

std::string required_string(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (!v) fail(child(path, key), "required field is missing");
    return string_value(*v, child(path, key));
}

int32_t int32_field(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (!v) return 0;
    if (v->is_number_integer()) {
        // is_number_integer() covers both signed and unsigned storage.
        if (v->is_number_unsigned()) {
            auto u = v->get<uint64_t>();
            if (u <= static_cast<uint64_t>(INT32_MAX)) return static_cast<int32_t>(u);
        } else {
            auto i = v->get<int64_t>();
            if (i >= INT32_MIN && i <= INT32_MAX) return static_cast<int32_t>(i);
        }
        expected(child(path, key), "a 32-bit integer", *v);
    }
    expected(child(path, key), "an integer", *v);
}

std::map<std::string, std::string> string_map_field(const json& obj, const char* key, const std::string& path) {
    std::map<std::string, std::string> out;
    const json* m = object_field(obj, key, path);
    if (!m) return out;
    const std::string mpath = child(path, key);
    for (auto it = m->begin(); it != m->end(); ++it) {
        out[it.key()] = string_value(it.value(), child(mpath, it.key()));
    }
    return out;
}

std::vector<std::string> string_list_field(const json& obj, const char* key, const std::string& path) {
    std::vector<std::string> out;
    const json* a = array_field(obj, key, path);
    if (!a) return out;
    const std::string apath = child(path, key);
    for (size_t i = 0; i < a->size(); ++i)
        out.push_back(string_value((*a)[i], element(apath, i)));
    return out;
}

std::string one_of(const json& obj, const char* key, const std::string& path,
                   std::initializer_list<const char*> allowed, bool allow_empty) {
    const json* v = field(obj, key);
    if (!v) return {};
    std::string s = string_value(*v, child(path, key));
    if (s.empty() && allow_empty) return s;
    for (const char* a : allowed) {
        if (s == a) return s;
    }
    std::string list;
    for (const char* a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
    }
    fail(child(path, key), "expected one of " + list + ", got " + json(s).dump());
}

bool valid_ipv4(const std::string& s) {
    in_addr a{};
    return inet_pton(AF_INET, s.c_str(), &a) == 1;
}

bool valid_ipv6(const std::string& s) {
    in6_addr a{};
    return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

// ---- per kind ----

ObjectMeta parse_meta(const json& j, const std::string& path, bool namespaced) {
    const json* m = field(j, "metadata");
    const std::string mpath = child(path, "metadata");
    if (!m) fail(mpath, "required field is missing");
    if (!m->is_object()) expected(mpath, "an object", *m);
    ObjectMeta meta;
    meta.name = required_string(*m, "name", mpath);
    if (meta.name.empty()) fail(child(mpath, "name"), "must not be empty");
    if (namespaced) meta.namespace_ = string_field(*m, "namespace", mpath);
    meta.uid = string_field(*m, "uid", mpath);
    meta.resource_version = string_field(*m, "resourceVersion", mpath);
    meta.labels = string_map_field(*m, "labels", mpath);
    return meta;
}

LabelSelector parse_selector(const json& s, const std::string& path) {
    LabelSelector sel;
    sel.match_labels = string_map_field(s, "matchLabels", path);
    const json* exprs = array_field(s, "matchExpressions", path);
    if (!exprs) return sel;
    const std::string epath = child(path, "matchExpressions");
    for (size_t i = 0; i < exprs->size(); ++i) {
        const json& e = (*exprs)[i];
        const std::string ipath = element(epath, i);
        if (!e.is_object()) expected(ipath, "an object", e);
        LabelSelectorRequirement r;
        r.key = required_string(e, "key", ipath);
        if (!field(e, "operator")) fail(child(ipath, "operator"), "required field is missing");
        r.op = one_of(e, "operator", ipath, {"In", "NotIn", "Exists", "DoesNotExist"}, false);
        r.values = string_list_field(e, "values", ipath);
        sel.match_expressions.push_back(std::move(r));
    }
    return sel;
}

EgressService parse_egress_service(const json& j, const std::string& path) {
    EgressService es;
    es.meta = parse_meta(j, path, true);
    if (const json* spec = object_field(j, "spec", path)) {
        const std::string spath = child(path, "spec");
        es.source_ip_by = one_of(*spec, "sourceIPBy", spath, {"LoadBalancerIP", "Network"}, true);
        if (const json* sel = object_field(*spec, "nodeSelector", spath)) {
            es.node_selector = parse_selector(*sel, child(spath, "nodeSelector"));
        }
        es.network = string_field(*spec, "network", spath);
    }
    if (const json* status = object_field(j, "status", path)) {
        es.has_status = true;
        es.status_host = string_field(*status, "host", child(path, "status"));
    }
    return es;
}

Service parse_service(const json& j, const std::string& path) {
    Service svc;
    svc.meta = parse_meta(j, path, true);
    svc.type = "ClusterIP";
    if (const json* spec = object_field(j, "spec", path)) {
        const std::string spath = child(path, "spec");
        std::string type =
            one_of(*spec, "type", spath, {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}, true);
        if (!type.empty()) svc.type = type;
        svc.cluster_ips = string_list_field(*spec, "clusterIPs", spath);
        if (svc.cluster_ips.empty()) {
            std::string ip = string_field(*spec, "clusterIP", spath);
            if (!ip.empty()) svc.cluster_ips.push_back(ip);
        }
        svc.external_traffic_policy = one_of(*spec, "externalTrafficPolicy", spath, {"Cluster", "Local"}, true);
        svc.ip_family_policy =
            one_of(*spec, "ipFamilyPolicy", spath, {"SingleStack", "PreferDualStack", "RequireDualStack"}, true);
        svc.ip_families = string_list_field(*spec, "ipFamilies", spath);
        for (size_t i = 0; i < svc.ip_families.size(); ++i) {
            const std::string& f = svc.ip_families[i];
            const std::string fpath = element(child(spath, "ipFamilies"), i);
            if (f != "IPv4" && f != "IPv6") fail(fpath, "expected \"IPv4\" or \"IPv6\", got " + json(f).dump());
            for (size_t k = 0; k < i; ++k)
                if (svc.ip_families[k] == f) fail(fpath, "expected each family once, got " + json(f).dump() + " twice");
        }
        if (const json* ports = array_field(*spec, "ports", spath)) {
            const std::string ppath = child(spath, "ports");
            for (size_t i = 0; i < ports->size(); ++i) {
                const json& e = (*ports)[i];
                const std::string epath = element(ppath, i);
                if (!e.is_object()) expected(epath, "an object", e);
                ServicePort sp;
                sp.protocol = one_of(e, "protocol", epath, {"TCP", "UDP", "SCTP"}, false);
                if (sp.protocol.empty()) sp.protocol = "TCP";
                if (!field(e, "port")) fail(child(epath, "port"), "required field is missing");
                int32_t port = int32_field(e, "port", epath);
                if (port < 1 || port > 65535)
                    fail(child(epath, "port"), "expected 1-65535, got " + std::to_string(port));
                sp.port = static_cast<uint16_t>(port);
                svc.ports.push_back(std::move(sp));
            }
        }
    }
    if (const json* status = object_field(j, "status", path)) {
        const std::string stpath = child(path, "status");
        if (const json* lb = object_field(*status, "loadBalancer", stpath)) {
            const std::string lbpath = child(stpath, "loadBalancer");
            if (const json* ing = array_field(*lb, "ingress", lbpath)) {
                const std::string ipath = child(lbpath, "ingress");
                for (size_t i = 0; i < ing->size(); ++i) {
                    const json& e = (*ing)[i];
                    const std::string epath = element(ipath, i);
                    if (!e.is_object()) expected(epath, "an object", e);
                    LoadBalancerIngress in;
                    in.ip = string_field(e, "ip", epath);
                    in.hostname = string_field(e, "hostname", epath);
                    if (!in.ip.empty() && !valid_ipv4(in.ip) && !valid_ipv6(in.ip)) {
                        fail(child(epath, "ip"), "expected an IPv4 or IPv6 address, got " + json(in.ip).dump());
                    }
                    svc.ingress.push_back(std::move(in));
                }
            }
        }
    }
    return svc;
}

EndpointSlice parse_endpoint_slice(const json& j, const std::string& path) {
    EndpointSlice es;
    es.meta = parse_meta(j, path, true);
    if (auto it = es.meta.labels.find("kubernetes.io/service-name"); it != es.meta.labels.end()) {
        es.service_name = it->second;
    }
    if (!field(j, "addressType")) fail(child(path, "addressType"), "required field is missing");
    es.address_type = one_of(j, "addressType", path, {"IPv4", "IPv6", "FQDN"}, false);
    const json* eps = array_field(j, "endpoints", path);
    if (!eps) return es;
    const std::string epath = child(path, "endpoints");
    for (size_t i = 0; i < eps->size(); ++i) {
        const json& e = (*eps)[i];
        const std::string ipath = element(epath, i);
        if (!e.is_object()) expected(ipath, "an object", e);
        Endpoint ep;
        if (!field(e, "addresses")) fail(child(ipath, "addresses"), "required field is missing");
        ep.addresses = string_list_field(e, "addresses", ipath);
        for (size_t a = 0; a < ep.addresses.size(); ++a) {
            const std::string& addr = ep.addresses[a];
            bool ok = es.address_type == "IPv4"   ? valid_ipv4(addr)
                      : es.address_type == "IPv6" ? valid_ipv6(addr)
                                                  : !addr.empty();
            if (!ok) {
                std::string what = es.address_type == "IPv4"   ? "an IPv4 address"
                                   : es.address_type == "IPv6" ? "an IPv6 address"
                                                               : "a non-empty name";
                fail(element(child(ipath, "addresses"), a),
                     "expected " + what + " (addressType " + es.address_type + "), got " + json(addr).dump());
            }
        }
        if (const json* n = field(e, "nodeName")) ep.node_name = string_value(*n, child(ipath, "nodeName"));
        es.endpoints.push_back(std::move(ep));
    }
    return es;
}

Node parse_node(const json& j, const std::string& path) {
    Node n;
    n.meta = parse_meta(j, path, false);
    const json* status = object_field(j, "status", path);
    if (!status) return n;
    const std::string stpath = child(path, "status");
    if (const json* conds = array_field(*status, "conditions", stpath)) {
        const std::string cpath = child(stpath, "conditions");
        for (size_t i = 0; i < conds->size(); ++i) {
            const json& c = (*conds)[i];
            const std::string ipath = element(cpath, i);
            if (!c.is_object()) expected(ipath, "an object", c);
            if (string_field(c, "type", ipath) == "Ready") {
                n.ready = string_field(c, "status", ipath) == "True";
            }
        }
    }
    if (const json* addrs = array_field(*status, "addresses", stpath)) {
        const std::string apath = child(stpath, "addresses");
        for (size_t i = 0; i < addrs->size(); ++i) {
            const json& a = (*addrs)[i];
            const std::string ipath = element(apath, i);
            if (!a.is_object()) expected(ipath, "an object", a);
            if (string_field(a, "type", ipath) == "InternalIP") {
                n.internal_ips.push_back(string_field(a, "address", ipath));
            }
        }
    }
    return n;
}

Lease parse_lease(const json& j, const std::string& path) {
    Lease l;
    l.meta = parse_meta(j, path, true);
    if (const json* m = field(j, "metadata"))
        l.annotations = string_map_field(*m, "annotations", child(path, "metadata"));
    const json* spec = object_field(j, "spec", path);
    if (!spec) return l;
    const std::string spath = child(path, "spec");
    l.holder_identity = string_field(*spec, "holderIdentity", spath);
    l.lease_duration_seconds = int32_field(*spec, "leaseDurationSeconds", spath);
    l.renew_time = string_field(*spec, "renewTime", spath);
    l.acquire_time = string_field(*spec, "acquireTime", spath);
    l.lease_transitions = int32_field(*spec, "leaseTransitions", spath);
    return l;
}

// A selector that must be one Kubernetes accepts (metav1.LabelSelectorAsSelector): In and NotIn
// carry values, Exists and DoesNotExist none, keys and values are label syntax. parse_selector has
// already refused an unknown operator.
LabelSelector parse_strict_selector(const json& s, const std::string& path) {
    if (!s.is_object()) expected(path, "an object", s);
    LabelSelector sel = parse_selector(s, path);
    for (size_t i = 0; i < sel.match_expressions.size(); ++i) {
        const auto& r = sel.match_expressions[i];
        const std::string vpath = child(element(child(path, "matchExpressions"), i), "values");
        const bool takes_values = r.op == "In" || r.op == "NotIn";
        if (takes_values && r.values.empty()) fail(vpath, "operator " + r.op + " needs at least one value");
        if (!takes_values && !r.values.empty()) fail(vpath, "operator " + r.op + " takes no values");
    }
    std::string why;
    if (!selector_valid(sel, &why)) fail(path, why);
    return sel;
}

net::IpAddr ip_value(const json& v, const std::string& path) {
    std::string s = string_value(v, path);
    auto ip = net::parse_ip(s);
    if (!ip) fail(path, "expected an IPv4 or IPv6 address, got " + json(s).dump());
    return *ip;
}

EgressIP parse_egress_ip(const json& j, const std::string& path) {
    EgressIP e;
    e.meta = parse_meta(j, path, false);
    const json* spec = object_field(j, "spec", path);
    const std::string spath = child(path, "spec");
    if (!spec) fail(spath, "required field is missing");
    const json* ips = array_field(*spec, "egressIPs", spath);
    const std::string ipath = child(spath, "egressIPs");
    if (!ips) fail(ipath, "required field is missing");
    for (size_t i = 0; i < ips->size(); ++i) {
        net::IpAddr ip = ip_value((*ips)[i], element(ipath, i));
        for (const auto& seen : e.egress_ips) {
            if (seen == ip) fail(element(ipath, i), "address " + net::to_string(ip) + " is listed twice");
        }
        e.egress_ips.push_back(ip);
    }
    const json* ns_sel = field(*spec, "namespaceSelector");
    if (!ns_sel) fail(child(spath, "namespaceSelector"), "required field is missing");
    e.namespace_selector = parse_strict_selector(*ns_sel, child(spath, "namespaceSelector"));
    if (const json* pod_sel = field(*spec, "podSelector")) {
        e.pod_selector = parse_strict_selector(*pod_sel, child(spath, "podSelector"));
    }
    if (const json* status = object_field(j, "status", path)) {
        const std::string stpath = child(path, "status");
        if (const json* items = array_field(*status, "items", stpath)) {
            const std::string itpath = child(stpath, "items");
            for (size_t i = 0; i < items->size(); ++i) {
                const json& it = (*items)[i];
                const std::string epath = element(itpath, i);
                if (!it.is_object()) expected(epath, "an object", it);
                EgressIPStatusItem item;
                item.node = required_string(it, "node", epath);
                const json* ip = field(it, "egressIP");
                if (!ip) fail(child(epath, "egressIP"), "required field is missing");
                item.egress_ip = ip_value(*ip, child(epath, "egressIP"));
                e.status_items.push_back(std::move(item));
            }
        }
    }
    return e;
}

Namespace parse_namespace(const json& j, const std::string& path) {
    Namespace n;
    n.meta = parse_meta(j, path, false);
    n.meta.uid = std::string{};  // releases the buffer: nothing reads a namespace's uid
    return n;
}

Pod parse_pod(const json& j, const std::string& path) {
    Pod p;
    p.meta = parse_meta(j, path, true);
    p.meta.uid = std::string{};  // releases the buffer: nothing reads a pod's uid
    if (const json* spec = object_field(j, "spec", path)) {
        const std::string spath = child(path, "spec");
        p.node = string_field(*spec, "nodeName", spath);
        if (const json* hn = field(*spec, "hostNetwork")) {
            if (!hn->is_boolean()) expected(child(spath, "hostNetwork"), "a boolean", *hn);
            p.host_network = hn->get<bool>();
        }
    }
    const json* status = object_field(j, "status", path);
    if (!status) return p;
    const std::string stpath = child(path, "status");
    const std::string phase =
        one_of(*status, "phase", stpath, {"Pending", "Running", "Succeeded", "Failed", "Unknown"}, true);
    p.phase = phase == "Running"     ? PodPhase::running
              : phase == "Succeeded" ? PodPhase::succeeded
              : phase == "Failed"    ? PodPhase::failed
              : phase == "Unknown"   ? PodPhase::unknown
                                     : PodPhase::pending;
    if (const json* ips = array_field(*status, "podIPs", stpath); ips && !ips->empty()) {
        const std::string ipath = child(stpath, "podIPs");
        for (size_t i = 0; i < ips->size(); ++i) {
            const json& e = (*ips)[i];
            const std::string epath = element(ipath, i);
            if (!e.is_object()) expected(epath, "an object", e);
            const json* ip = field(e, "ip");
            if (!ip) fail(child(epath, "ip"), "required field is missing");
            p.ips.push_back(ip_value(*ip, child(epath, "ip")));
        }
    } else if (const json* ip = field(*status, "podIP")) {
        p.ips.push_back(ip_value(*ip, child(stpath, "podIP")));
    }
    p.ips.shrink_to_fit();
    return p;
}

}  // namespace

const char* to_string(PodPhase p) {
    switch (p) {
    case PodPhase::pending:
        return "Pending";
    case PodPhase::running:
        return "Running";
    case PodPhase::succeeded:
        return "Succeeded";
    case PodPhase::failed:
        return "Failed";
    case PodPhase::unknown:
        return "Unknown";
    }
    return "Unknown";
}

ObjectError::ObjectError(std::string path, std::string message)
    : std::runtime_error(path + ": " + message), path_(std::move(path)), message_(std::move(message)) {}

const char* to_string(Kind k) {
    return info(k).name;
}

std::optional<Kind> kind_from_string(std::string_view kind) {
    for (const auto& i : kKinds) {
        if (kind == i.name) return i.kind;
    }
    return std::nullopt;
}

const char* api_version_of(Kind k) {
    return info(k).api_version;
}

bool is_namespaced(Kind k) {
    return info(k).namespaced;
}

bool is_supported_kind(std::string_view api_version, std::string_view kind) {
    auto k = kind_from_string(kind);
    return k && api_version == info(*k).api_version;
}

Kind kind_of(const Object& o) {
    return std::visit(
        [](const auto& v) -> Kind {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, EgressService>)
                return Kind::egress_service;
            else if constexpr (std::is_same_v<T, Service>)
                return Kind::service;
            else if constexpr (std::is_same_v<T, EndpointSlice>)
                return Kind::endpoint_slice;
            else if constexpr (std::is_same_v<T, Node>)
                return Kind::node;
            else if constexpr (std::is_same_v<T, Lease>)
                return Kind::lease;
            else if constexpr (std::is_same_v<T, EgressIP>)
                return Kind::egress_ip;
            else if constexpr (std::is_same_v<T, Namespace>)
                return Kind::namespace_;
            else if constexpr (std::is_same_v<T, Pod>)
                return Kind::pod;
            else
                return Kind::egress_firewall;
        },
        o);
}

const ObjectMeta& meta_of(const Object& o) {
    return std::visit([](const auto& v) -> const ObjectMeta& { return v.meta; }, o);
}

ObjectMeta& meta_of(Object& o) {
    return std::visit([](auto& v) -> ObjectMeta& { return v.meta; }, o);
}

std::string key_of(const ObjectMeta& meta) {
    if (meta.namespace_.empty()) return meta.name;
    return meta.namespace_ + "/" + meta.name;
}

std::string key_of(const Object& o) {
    return key_of(meta_of(o));
}

Object parse_object(const json& j, const std::string& path) {
    if (!j.is_object()) expected(path, "a Kubernetes object", j);
    const std::string api_version = required_string(j, "apiVersion", path);
    const std::string kind = required_string(j, "kind", path);
    auto k = kind_from_string(kind);
    if (!k) {
        fail(child(path, "kind"),
             "unsupported kind " + json(kind).dump() + " (apiVersion " + json(api_version).dump() +
                 "); egw reads EgressService, Service, EndpointSlice, Node, Lease, EgressIP, Namespace, Pod and "
                 "EgressFirewall");
    }
    if (api_version != info(*k).api_version) {
        fail(child(path, "apiVersion"), std::string("expected \"") + info(*k).api_version + "\" for kind " + kind +
                                            ", got " + json(api_version).dump());
    }
    switch (*k) {
    case Kind::egress_service:
        return parse_egress_service(j, path);
    case Kind::service:
        return parse_service(j, path);
    case Kind::endpoint_slice:
        return parse_endpoint_slice(j, path);
    case Kind::node:
        return parse_node(j, path);
    case Kind::lease:
        return parse_lease(j, path);
    case Kind::egress_ip:
        return parse_egress_ip(j, path);
    case Kind::namespace_:
        return parse_namespace(j, path);
    case Kind::pod:
        return parse_pod(j, path);
    case Kind::egress_firewall:
        return parse_egress_firewall(j, path);
    }
    fail(path, "unreachable");
}

// ---- ObjectSet ----

void ObjectSet::upsert(Object o) {
    std::string key = key_of(o);
    std::visit(
        [&](auto&& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, EgressService>)
                egress_services.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, Service>)
                services.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, EndpointSlice>)
                endpoint_slices.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, Node>)
                nodes.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, Lease>)
                leases.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, EgressIP>)
                egress_ips.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, Namespace>)
                namespaces.insert_or_assign(key, std::move(v));
            else if constexpr (std::is_same_v<T, Pod>)
                pods.insert_or_assign(key, std::move(v));
            else
                egress_firewalls.insert_or_assign(key, std::move(v));
        },
        std::move(o));
}

bool ObjectSet::erase(Kind kind, const std::string& key) {
    switch (kind) {
    case Kind::egress_service:
        return egress_services.erase(key) > 0;
    case Kind::service:
        return services.erase(key) > 0;
    case Kind::endpoint_slice:
        return endpoint_slices.erase(key) > 0;
    case Kind::node:
        return nodes.erase(key) > 0;
    case Kind::lease:
        return leases.erase(key) > 0;
    case Kind::egress_ip:
        return egress_ips.erase(key) > 0;
    case Kind::namespace_:
        return namespaces.erase(key) > 0;
    case Kind::pod:
        return pods.erase(key) > 0;
    case Kind::egress_firewall:
        return egress_firewalls.erase(key) > 0;
    }
    return false;
}

bool ObjectSet::erase(std::string_view kind, const std::string& key) {
    auto k = kind_from_string(kind);
    return k && erase(*k, key);
}

bool ObjectSet::contains(Kind kind, const std::string& key) const {
    switch (kind) {
    case Kind::egress_service:
        return egress_services.count(key) > 0;
    case Kind::service:
        return services.count(key) > 0;
    case Kind::endpoint_slice:
        return endpoint_slices.count(key) > 0;
    case Kind::node:
        return nodes.count(key) > 0;
    case Kind::lease:
        return leases.count(key) > 0;
    case Kind::egress_ip:
        return egress_ips.count(key) > 0;
    case Kind::namespace_:
        return namespaces.count(key) > 0;
    case Kind::pod:
        return pods.count(key) > 0;
    case Kind::egress_firewall:
        return egress_firewalls.count(key) > 0;
    }
    return false;
}

LabelSelector parse_label_selector(const json& s, const std::string& path) {
    return parse_strict_selector(s, path);
}

size_t ObjectSet::size() const {
    return egress_services.size() + services.size() + endpoint_slices.size() + nodes.size() + leases.size() +
           egress_ips.size() + namespaces.size() + pods.size() + egress_firewalls.size();
}

}  // namespace egw::model
