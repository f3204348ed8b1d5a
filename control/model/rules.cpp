// SPDX-License-Identifier: Apache-2.0
//
// Label selectors and the single-gateway EgressService rules. See rules.h.
#include "control/model/rules.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string_view>

namespace egw::model {

namespace {

bool is_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_lower_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], the name part of a qualified name and a label value.
bool qualified_name_chars(const std::string& s) {
    if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// RFC 1123 subdomain: lower-case labels of [a-z0-9-] starting and ending alphanumeric, joined by
// dots, at most 253 characters.
bool dns1123_subdomain(const std::string& s, std::string* why) {
    if (s.size() > 253) {
        *why = "prefix part must be no more than 253 characters";
        return false;
    }
    size_t start = 0;
    while (true) {
        size_t dot = s.find('.', start);
        std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool ok = !label.empty() && is_lower_alnum(label.front()) && is_lower_alnum(label.back()) &&
                  std::all_of(label.begin(), label.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
        if (!ok) {
            *why = "prefix part must be a lower-case DNS subdomain (e.g. example.com)";
            return false;
        }
        if (dot == std::string::npos) return true;
        start = dot + 1;
    }
}

bool label_key_valid(const std::string& key, std::string* why) {
    std::string name = key;
    if (auto slash = key.find('/'); slash != std::string::npos) {
        std::string prefix = key.substr(0, slash);
        name = key.substr(slash + 1);
        if (name.find('/') != std::string::npos) {
            *why = "a qualified name has at most one '/'";
            return false;
        }
        if (prefix.empty()) {
            *why = "prefix part must not be empty";
            return false;
        }
        if (!dns1123_subdomain(prefix, why)) return false;
    }
    if (name.empty()) {
        *why = "name part must not be empty";
        return false;
    }
    if (name.size() > 63) {
        *why = "name part must be no more than 63 characters";
        return false;
    }
    if (!qualified_name_chars(name)) {
        *why =
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character";
        return false;
    }
    return true;
}

bool label_value_valid(const std::string& value, std::string* why) {
    if (value.empty()) return true;
    if (value.size() > 63) {
        *why = "must be no more than 63 characters";
        return false;
    }
    if (!qualified_name_chars(value)) {
        *why =
            "must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character";
        return false;
    }
    return true;
}

std::string quoted(const std::string& s) {
    return "\"" + s + "\"";
}

bool requirement_matches(const LabelSelectorRequirement& r, const std::map<std::string, std::string>& labels) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    auto in_values = [&] { return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end(); };
    if (r.op == "In") return in_values();
    if (r.op == "NotIn") return !in_values();
    if (r.op == "Exists") return has;
    if (r.op == "DoesNotExist") return !has;
    return false;
}

std::optional<uint32_t> ipv4_host_order(const std::string& s) {
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
    return ntohl(a.s_addr);
}

}  // namespace

bool selector_valid(const LabelSelector& sel, std::string* why) {
    std::string local;
    std::string* w = why ? why : &local;
    std::string detail;
    for (const auto& [k, v] : sel.match_labels) {
        if (!label_key_valid(k, &detail)) {
            *w = "matchLabels key " + quoted(k) + ": " + detail;
            return false;
        }
        if (!label_value_valid(v, &detail)) {
            *w = "matchLabels[" + quoted(k) + "] value " + quoted(v) + ": " + detail;
            return false;
        }
    }
    for (size_t i = 0; i < sel.match_expressions.size(); ++i) {
        const auto& r = sel.match_expressions[i];
        const std::string where = "matchExpressions[" + std::to_string(i) + "]";
        if (!label_key_valid(r.key, &detail)) {
            *w = where + ".key " + quoted(r.key) + ": " + detail;
            return false;
        }
        if (r.op == "In" || r.op == "NotIn") {
            if (r.values.empty()) {
                *w = where + ".values: operator " + r.op + " needs at least one value";
                return false;
            }
            for (const auto& v : r.values) {
                if (!label_value_valid(v, &detail)) {
                    *w = where + ".values " + quoted(v) + ": " + detail;
                    return false;
                }
            }
        } else if (r.op == "Exists" || r.op == "DoesNotExist") {
            if (!r.values.empty()) {
                *w = where + ".values: operator " + r.op + " takes no values";
                return false;
            }
        } else {
            *w = where + ".operator " + quoted(r.op) + ": expected one of In, NotIn, Exists, DoesNotExist";
            return false;
        }
    }
    return true;
}

bool selector_matches(const LabelSelector& sel, const std::map<std::string, std::string>& labels) {
    for (const auto& [k, v] : sel.match_labels) {
        auto it = labels.find(k);
        if (it == labels.end() || it->second != v) return false;
    }
    for (const auto& r : sel.match_expressions) {
        if (!requirement_matches(r, labels)) return false;
    }
    return true;
}

const char* to_string(Mode m) {
    return m == Mode::network ? "Network" : "LoadBalancerIP";
}

std::string node_label_for(const std::string& key) {
    std::string label = kNodeLabelPrefix;
    auto slash = key.find('/');
    if (slash == std::string::npos) return label + key;
    return label + key.substr(0, slash) + "-" + key.substr(slash + 1);
}

std::string label_key_problem(const std::string& key) {
    const auto slash = key.rfind('/');
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    if (name.empty()) return "its name part is empty";
    if (name.size() > 63) return "its name part \"" + name + "\" is longer than 63 characters";
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
    for (char c : name)
        if (!alnum(c) && c != '-' && c != '_' && c != '.')
            return "its name part \"" + name + "\" has a character other than letters, digits, '-', '_' and '.'";
    if (!alnum(name.front()) || !alnum(name.back()))
        return "its name part \"" + name + "\" does not start and end with a letter or digit";
    return "";
}

SliceIndex index_endpoint_slices(const ObjectSet& objects) {
    SliceIndex slices;
    for (const auto& [key, slice] : objects.endpoint_slices) {
        if (slice.service_name.empty()) continue;
        slices[slice.meta.namespace_ + "/" + slice.service_name].push_back(&slice);
    }
    return slices;
}

ServiceFacts service_facts(const ObjectSet& objects, const std::string& key,
                           const std::vector<const EndpointSlice*>* slices,
                           const std::vector<net::IpPrefix>& pod_cidrs) {
    ServiceFacts f;
    ServiceState& st = f.state;
    st.key = key;
    if (auto it = objects.egress_services.find(key); it != objects.egress_services.end()) {
        f.egress_service = &it->second;
        st.mode = it->second.source_ip_by == "Network" ? Mode::network : Mode::load_balancer_ip;
        st.network = it->second.network;
    }
    auto svc_it = objects.services.find(key);
    if (svc_it == objects.services.end()) return f;
    const Service& svc = svc_it->second;
    f.service = &svc;
    f.load_balancer = svc.type == "LoadBalancer";

    // Last IPv4 and last IPv6 ingress entries; anything that is not IPv4 (including an entry with
    // only a hostname) lands in the IPv6 slot, as OVN-Kubernetes' node controller does.
    for (const auto& in : svc.ingress) {
        if (!in.ip.empty()) f.has_ingress_ip = true;
        if (auto v4 = ipv4_host_order(in.ip)) {
            st.ingress_ipv4 = v4;
        } else {
            st.ingress_ipv6 = net::parse_ip(in.ip);  // nullopt for a hostname-only entry
        }
    }
    st.etp_local = svc.external_traffic_policy == "Local";
    st.ip_families = svc.ip_families;
    st.ip_family_policy = svc.ip_family_policy;
    for (const auto& sp : svc.ports) {
        // SCTP is not translated, so it has no ingress either.
        if (sp.protocol == "TCP")
            st.ports.push_back(uint32_t{IPPROTO_TCP} << 16 | sp.port);
        else if (sp.protocol == "UDP")
            st.ports.push_back(uint32_t{IPPROTO_UDP} << 16 | sp.port);
    }
    std::sort(st.ports.begin(), st.ports.end());
    st.ports.erase(std::unique(st.ports.begin(), st.ports.end()), st.ports.end());

    auto in_pod_network = [&](const net::IpAddr& ip) {
        return std::any_of(pod_cidrs.begin(), pod_cidrs.end(), [&](const auto& p) { return p.contains(ip); });
    };
    if (slices) {
        for (const EndpointSlice* slice : *slices) {
            if (slice->address_type == "FQDN") continue;
            for (const auto& ep : slice->endpoints) {
                if (ep.node_name && !ep.node_name->empty()) st.endpoint_nodes.push_back(*ep.node_name);
                // One slice set per family: each slice's addresses are of its addressType.
                for (const auto& addr : ep.addresses) {
                    auto ip = net::parse_ip(addr);
                    if (!ip || !in_pod_network(*ip)) continue;
                    if (slice->address_type == "IPv4" && ip->is_v4())
                        st.endpoint_ipv4s.push_back(ip->v4());
                    else if (slice->address_type == "IPv6" && ip->is_v6())
                        st.endpoint_ipv6s.push_back(*ip);
                }
            }
        }
    }
    std::sort(st.endpoint_ipv4s.begin(), st.endpoint_ipv4s.end());
    st.endpoint_ipv4s.erase(std::unique(st.endpoint_ipv4s.begin(), st.endpoint_ipv4s.end()), st.endpoint_ipv4s.end());
    std::sort(st.endpoint_ipv6s.begin(), st.endpoint_ipv6s.end());
    st.endpoint_ipv6s.erase(std::unique(st.endpoint_ipv6s.begin(), st.endpoint_ipv6s.end()), st.endpoint_ipv6s.end());
    std::sort(st.endpoint_nodes.begin(), st.endpoint_nodes.end());
    st.endpoint_nodes.erase(std::unique(st.endpoint_nodes.begin(), st.endpoint_nodes.end()), st.endpoint_nodes.end());
    return f;
}

std::vector<ServiceState> evaluate_single_gateway(const ObjectSet& objects, const GatewayIdentity& self,
                                                  const std::vector<net::IpPrefix>& pod_cidrs) {
    // This gateway as a candidate node: the Node object, when there is one, is authoritative.
    std::map<std::string, std::string> labels = self.labels;
    bool ready = true;
    if (auto it = objects.nodes.find(self.node_name); it != objects.nodes.end()) {
        for (const auto& [k, v] : it->second.meta.labels)
            labels[k] = v;
        ready = it->second.ready;
    }

    const SliceIndex slices = index_endpoint_slices(objects);

    std::vector<ServiceState> out;
    out.reserve(objects.egress_services.size());
    for (const auto& [key, es] : objects.egress_services) {
        auto sl = slices.find(key);
        ServiceFacts f = service_facts(objects, key, sl == slices.end() ? nullptr : &sl->second, pod_cidrs);
        ServiceState& st = f.state;
        if (!f.service) {
            st.reason = "Service not found";
            out.push_back(std::move(st));
            continue;
        }

        if (st.mode == Mode::network) {
            // Every gateway routes it; the node side still needs a LoadBalancer with an ingress IP.
            st.status_host = kHostAll;
            if (!f.load_balancer)
                st.reason = "Service is not type LoadBalancer";
            else if (!f.has_ingress_ip)
                st.reason = "Service has no ingress IP";
            else
                st.serve_here = true;
            out.push_back(std::move(st));
            continue;
        }

        std::string why;
        const std::string& me = self.node_name;
        if (!f.load_balancer) {
            st.reason = "Service is not type LoadBalancer";
        } else if (!f.has_ingress_ip) {
            st.reason = "Service has no ingress IP";
        } else if (!st.has_pod_endpoints()) {
            st.reason = "no endpoints in the pod network";
        } else if (!selector_valid(es.node_selector, &why)) {
            st.reason = "invalid nodeSelector: " + why;
        } else if (!selector_matches(es.node_selector, labels)) {
            st.reason = "no eligible node: " + me + " does not match nodeSelector";
        } else if (st.etp_local && !std::binary_search(st.endpoint_nodes.begin(), st.endpoint_nodes.end(), me)) {
            st.reason = "no eligible node: " + me + " hosts no endpoint (externalTrafficPolicy Local)";
        } else if (!ready) {
            st.reason = "no eligible node: " + me + " is not Ready";
        } else {
            st.status_host = me;
            st.serve_here = true;
        }
        out.push_back(std::move(st));
    }
    return out;
}

ServiceDelta diff(const std::map<std::string, ServiceState>& before, const std::vector<ServiceState>& after) {
    ServiceDelta d;
    std::unordered_map<std::string_view, bool> present;
    present.reserve(after.size());
    for (const auto& s : after) {
        present.emplace(s.key, true);
        auto it = before.find(s.key);
        if (it == before.end() || !(it->second == s)) d.changed.push_back(s);
    }
    for (const auto& [key, s] : before)
        if (!present.count(key)) d.removed.push_back(key);
    return d;
}

}  // namespace egw::model
