// SPDX-License-Identifier: Apache-2.0
//
// EgressFirewall parsing, selection and evaluation. See egress_firewall.h.
#include "config/json_text.h"
#include "control/model/egress_firewall.h"

#include <netinet/in.h>

#include <algorithm>
#include <cctype>

#include "control/model/rules.h"

namespace egw::model {

using nlohmann::json;

namespace {

// The JSON path conventions of objects.cpp: identifiers as ".key", other keys quoted in brackets.
std::string child(const std::string& path, const std::string& key) {
    bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
    for (char c : key)
        plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    return plain ? path + "." + key : path + "[" + json(key).dump() + "]";
}

std::string element(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

std::string describe(const json& v) {
    return json_text::quote_refused(v);
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
    throw ObjectError(path, message);
}

[[noreturn]] void expected(const std::string& path, const std::string& what, const json& got) {
    fail(path, "expected " + what + ", got " + describe(got));
}

// A member that is present and not null (JSON null reads as absent, as everywhere in the model).
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json& required(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (!v) fail(child(path, key), "required field is missing");
    return *v;
}

const std::string& string_of(const json& v, const std::string& path) {
    if (!v.is_string()) expected(path, "a string", v);
    return v.get_ref<const std::string&>();
}

// RFC 1123 names as upstream's CRD pattern allows them, with an optional leading "*." and final
// dot; each label 1-63 characters, the whole at most 253.
std::optional<FirewallDnsName> normalize_dns_name(const std::string& written) {
    FirewallDnsName out;
    std::string s = written;
    if (s.size() >= 2 && s.compare(0, 2, "*.") == 0) {
        out.wildcard = true;
        s.erase(0, 2);
    }
    if (!s.empty() && s.back() == '.') s.pop_back();
    if (s.empty() || s.size() > 253) return std::nullopt;
    size_t label = 0;
    for (char c : s) {
        if (c == '.') {
            if (label == 0) return std::nullopt;
            label = 0;
            continue;
        }
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return std::nullopt;
        if (++label > 63) return std::nullopt;
    }
    if (label == 0) return std::nullopt;
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.name = out.wildcard ? "*." + s : s;
    return out;
}

FirewallDestination parse_to(const json& to, const std::string& path) {
    if (!to.is_object()) expected(path, "an object", to);
    const json* cidr = field(to, "cidrSelector");
    const json* dns = field(to, "dnsName");
    const json* nodes = field(to, "nodeSelector");
    if ((cidr != nullptr) + (dns != nullptr) + (nodes != nullptr) != 1)
        fail(path, "expected exactly one of cidrSelector, dnsName, nodeSelector");
    if (cidr) {
        const std::string cpath = child(path, "cidrSelector");
        auto p = net::parse_prefix(string_of(*cidr, cpath));
        if (!p) expected(cpath, "an IPv4 or IPv6 CIDR", *cidr);
        return net::IpPrefix{p->network(), p->len};
    }
    if (dns) {
        const std::string dpath = child(path, "dnsName");
        auto n = normalize_dns_name(string_of(*dns, dpath));
        if (!n) expected(dpath, "a DNS name, optionally starting with \"*.\"", *dns);
        return *n;
    }
    const std::string npath = child(path, "nodeSelector");
    if (!nodes->is_object()) expected(npath, "an object", *nodes);
    LabelSelector sel;
    if (const json* ml = field(*nodes, "matchLabels")) {
        const std::string mpath = child(npath, "matchLabels");
        if (!ml->is_object()) expected(mpath, "an object", *ml);
        for (auto it = ml->begin(); it != ml->end(); ++it)
            sel.match_labels[it.key()] = string_of(it.value(), child(mpath, it.key()));
    }
    if (const json* exprs = field(*nodes, "matchExpressions")) {
        const std::string epath = child(npath, "matchExpressions");
        if (!exprs->is_array()) expected(epath, "an array", *exprs);
        for (size_t i = 0; i < exprs->size(); ++i) {
            const json& e = (*exprs)[i];
            const std::string ipath = element(epath, i);
            if (!e.is_object()) expected(ipath, "an object", e);
            LabelSelectorRequirement r;
            r.key = string_of(required(e, "key", ipath), child(ipath, "key"));
            r.op = string_of(required(e, "operator", ipath), child(ipath, "operator"));
            if (const json* vals = field(e, "values")) {
                const std::string vpath = child(ipath, "values");
                if (!vals->is_array()) expected(vpath, "an array", *vals);
                for (size_t k = 0; k < vals->size(); ++k)
                    r.values.push_back(string_of((*vals)[k], element(vpath, k)));
            }
            sel.match_expressions.push_back(std::move(r));
        }
    }
    std::string why;
    if (!selector_valid(sel, &why)) fail(npath, why);
    return sel;
}

FirewallPort parse_port(const json& p, const std::string& path) {
    if (!p.is_object()) expected(path, "an object", p);
    FirewallPort out;
    const std::string protocol = string_of(required(p, "protocol", path), child(path, "protocol"));
    if (protocol == "TCP")
        out.protocol = IPPROTO_TCP;
    else if (protocol == "UDP")
        out.protocol = IPPROTO_UDP;
    else if (protocol == "SCTP")
        out.protocol = IPPROTO_SCTP;
    else
        fail(child(path, "protocol"), "expected one of TCP, UDP, SCTP, got " + json(protocol).dump());
    if (const json* port = field(p, "port")) {
        if (!port->is_number_integer() || port->get<int64_t>() < 1 || port->get<int64_t>() > 65535)
            expected(child(path, "port"), "an integer 1-65535", *port);
        out.port = static_cast<uint16_t>(port->get<int64_t>());
    }
    return out;
}

}  // namespace

const char* to_string(FirewallAction a) {
    return a == FirewallAction::deny ? "Deny" : "Allow";
}

EgressFirewall parse_egress_firewall(const json& j, const std::string& path) {
    if (!j.is_object()) expected(path, "a Kubernetes object", j);
    const std::string api_version = string_of(required(j, "apiVersion", path), child(path, "apiVersion"));
    const std::string kind = string_of(required(j, "kind", path), child(path, "kind"));
    if (kind != "EgressFirewall") fail(child(path, "kind"), "expected \"EgressFirewall\", got " + json(kind).dump());
    if (api_version != "k8s.ovn.org/v1")
        fail(child(path, "apiVersion"),
             "expected \"k8s.ovn.org/v1\" for kind EgressFirewall, got " + json(api_version).dump());

    EgressFirewall fw;
    const std::string mpath = child(path, "metadata");
    const json& m = required(j, "metadata", path);
    if (!m.is_object()) expected(mpath, "an object", m);
    fw.meta.name = string_of(required(m, "name", mpath), child(mpath, "name"));
    if (fw.meta.name.empty()) fail(child(mpath, "name"), "must not be empty");
    if (const json* ns = field(m, "namespace")) fw.meta.namespace_ = string_of(*ns, child(mpath, "namespace"));
    if (const json* uid = field(m, "uid")) fw.meta.uid = string_of(*uid, child(mpath, "uid"));
    if (const json* rv = field(m, "resourceVersion"))
        fw.meta.resource_version = string_of(*rv, child(mpath, "resourceVersion"));

    const std::string spath = child(path, "spec");
    const json& spec = required(j, "spec", path);
    if (!spec.is_object()) expected(spath, "an object", spec);
    const std::string epath = child(spath, "egress");
    const json& egress = required(spec, "egress", spath);
    if (!egress.is_array()) expected(epath, "an array", egress);
    fw.rules.reserve(egress.size());
    for (size_t i = 0; i < egress.size(); ++i) {
        const json& r = egress[i];
        const std::string rpath = element(epath, i);
        if (!r.is_object()) expected(rpath, "an object", r);
        FirewallRule rule;
        const std::string type = string_of(required(r, "type", rpath), child(rpath, "type"));
        if (type == "Allow")
            rule.action = FirewallAction::allow;
        else if (type == "Deny")
            rule.action = FirewallAction::deny;
        else
            fail(child(rpath, "type"), "expected one of Allow, Deny, got " + json(type).dump());
        rule.to = parse_to(required(r, "to", rpath), child(rpath, "to"));
        if (const json* ports = field(r, "ports")) {
            const std::string ppath = child(rpath, "ports");
            if (!ports->is_array()) expected(ppath, "an array", *ports);
            for (size_t k = 0; k < ports->size(); ++k)
                rule.ports.push_back(parse_port((*ports)[k], element(ppath, k)));
        }
        fw.rules.push_back(std::move(rule));
    }
    return fw;
}

EgressFirewallSelection select_egress_firewalls(const std::map<std::string, EgressFirewall>& objects) {
    EgressFirewallSelection out;
    for (const auto& [key, fw] : objects) {
        if (fw.meta.name != kEgressFirewallName) {
            out.ignored.push_back(key + ": ignored: only the EgressFirewall named \"default\" applies in a namespace");
        } else if (fw.rules.size() > kMaxEgressFirewallRules) {
            out.ignored.push_back(key + ": ignored: too many rules (" + std::to_string(fw.rules.size()) + ", at most " +
                                  std::to_string(kMaxEgressFirewallRules) + ")");
        } else {
            out.by_namespace[fw.meta.namespace_] = &fw;
        }
    }
    return out;
}

FirewallResolution resolve_egress_firewall(const std::vector<FirewallRule>& rules,
                                           const std::map<std::string, std::vector<net::IpAddr>>& dns,
                                           const std::map<std::string, Node>& nodes) {
    FirewallResolution out(rules.size());
    for (size_t i = 0; i < rules.size(); ++i) {
        std::vector<net::IpPrefix>& dst = out[i];
        if (const auto* cidr = std::get_if<net::IpPrefix>(&rules[i].to)) {
            dst.push_back(*cidr);
        } else if (const auto* name = std::get_if<FirewallDnsName>(&rules[i].to)) {
            if (auto it = dns.find(name->name); it != dns.end()) {
                for (const net::IpAddr& a : it->second)
                    dst.push_back(net::IpPrefix{a, static_cast<uint8_t>(a.bits())});
            }
        } else {
            const auto& sel = std::get<LabelSelector>(rules[i].to);
            for (const auto& [key, node] : nodes) {
                if (!selector_matches(sel, node.meta.labels)) continue;
                for (const std::string& ip : node.internal_ips) {
                    if (auto a = net::parse_ip(ip)) dst.push_back(net::IpPrefix{*a, static_cast<uint8_t>(a->bits())});
                }
            }
        }
    }
    return out;
}

FirewallVerdict evaluate_egress_firewall(const std::vector<FirewallRule>& rules, const FirewallResolution& resolution,
                                         const FirewallFlow& flow) {
    const size_t n = std::min(rules.size(), resolution.size());
    for (size_t i = 0; i < n; ++i) {
        bool to = false;
        for (const net::IpPrefix& p : resolution[i])
            to = to || p.contains(flow.dst);
        if (!to) continue;
        bool port = rules[i].ports.empty();
        for (const FirewallPort& p : rules[i].ports)
            port = port || (p.protocol == flow.protocol && (p.port == 0 || p.port == flow.dst_port));
        if (port) return FirewallVerdict{rules[i].action, static_cast<uint32_t>(i)};
    }
    return FirewallVerdict{};
}

}  // namespace egw::model
