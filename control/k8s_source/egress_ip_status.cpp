// SPDX-License-Identifier: Apache-2.0
//
// See egress_ip_status.h.
#include "control/k8s_source/egress_ip_status.h"

#include <optional>

#include "control/k8s/resources.h"
#include "control/k8s_source/controller_internal.h"

namespace egw::k8s_source {

using nlohmann::json;

namespace {

// The addresses of a JSON array of address strings; nullopt when it is not one.
std::optional<std::vector<net::IpAddr>> addresses_of(const json* list) {
    if (!list || !list->is_array()) return std::nullopt;
    std::vector<net::IpAddr> out;
    for (const auto& v : *list) {
        if (!v.is_string()) return std::nullopt;
        auto ip = net::parse_ip(v.get<std::string>());
        if (!ip) return std::nullopt;
        out.push_back(*ip);
    }
    return out;
}

const json* field(const json& obj, const char* outer, const char* inner) {
    auto o = obj.find(outer);
    if (o == obj.end() || !o->is_object()) return nullptr;
    auto i = o->find(inner);
    return i == o->end() ? nullptr : &*i;
}

// status.items of an object read back, when it is well-formed.
std::optional<std::vector<model::EgressIPStatusItem>> status_items_of(const json& obj) {
    const json* items = field(obj, "status", "items");
    if (!items) return std::vector<model::EgressIPStatusItem>{};
    if (!items->is_array()) return std::nullopt;
    std::vector<model::EgressIPStatusItem> out;
    for (const auto& it : *items) {
        if (!it.is_object() || !it.contains("node") || !it["node"].is_string() || !it.contains("egressIP") ||
            !it["egressIP"].is_string())
            return std::nullopt;
        auto ip = net::parse_ip(it["egressIP"].get<std::string>());
        if (!ip) return std::nullopt;
        out.push_back(model::EgressIPStatusItem{it["node"].get<std::string>(), *ip});
    }
    return out;
}

}  // namespace

json egress_ip_status_items_json(const std::vector<model::EgressIPStatusItem>& items) {
    json out = json::array();
    for (const auto& it : items)
        out.push_back({{"node", it.node}, {"egressIP", net::to_string(it.egress_ip)}});
    return out;
}

k8s::WriteResult write_egress_ip_status(k8s::Writer& writer, const std::string& name,
                                        const std::vector<net::IpAddr>& egress_ips,
                                        const std::vector<model::EgressIPStatusItem>& items,
                                        const std::string& resource_version) {
    const std::string path = k8s::resources::egress_ips.object_path("", name);
    const json status = {{"items", egress_ip_status_items_json(items)}};
    std::string version = resource_version;
    k8s::WriteResult res;
    for (int attempt = 0; attempt < 3; ++attempt) {
        json patch = {{"status", status}};
        if (!version.empty()) patch["metadata"] = {{"resourceVersion", version}};
        res = writer.merge_patch(path, patch);
        res.written = res.ok();
        if (!res.conflict()) return res;
        k8s::WriteResult got = writer.read(k8s::resources::egress_ips, "", name);
        if (!got.ok()) return got.not_found() ? got : res;
        // Decided on another spec: writing it now could name an address the object no longer has.
        if (addresses_of(field(got.object, "spec", "egressIPs")) != egress_ips) return res;
        if (status_items_of(got.object) == items) {
            got.written = false;
            return got;  // it says so already
        }
        version = detail::resource_version_of(got.object);
    }
    return res;
}

}  // namespace egw::k8s_source
