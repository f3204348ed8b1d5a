// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/writer.h"

#include <ctime>

#include "control/k8s/log.h"

namespace egw::k8s {

using nlohmann::json;

namespace {
constexpr const char* kMergePatch = "application/merge-patch+json";
constexpr const char* kJson = "application/json";
// Names egw as the writer in metadata.managedFields.
constexpr const char* kFieldManager = "?fieldManager=egwd";
}  // namespace

Writer::Writer(std::shared_ptr<Transport> transport, WriterOptions opts)
    : transport_(std::move(transport)), opts_(opts) {}

WriteResult Writer::finish(Response&& r, int attempts) {
    WriteResult w;
    w.status = r.status;
    w.attempts = attempts;
    if (r.ok()) {
        w.object = json::parse(r.body, nullptr, false);
        if (w.object.is_discarded()) {
            w.object = json();
            w.error = "the response is not JSON";
        }
        w.written = true;
        return w;
    }
    w.error = describe(r);
    if (r.status == 403)
        w.error += " (egwd's RBAC does not allow this write; see docs/kubernetes.md, RBAC)";
    else if (r.status == 401)
        w.error += " (the API server rejected the credentials from " + transport_->credentials().source + ")";
    if (r.status != 0) w.reason = api_status(r).reason;
    return w;
}

WriteResult Writer::merge_patch(const std::string& path, const json& patch) {
    auto r = transport_->request("PATCH", path + kFieldManager, patch.dump(), kMergePatch, nullptr, opts_.timeout);
    WriteResult w = finish(std::move(r));
    if (!w.ok()) logger()->debug("k8s: PATCH {} failed: {}", path, w.error);
    return w;
}

WriteResult Writer::patch_status(const ResourceType& type, const std::string& ns, const std::string& name,
                                 const json& status, const std::string& resource_version) {
    json patch = {{"status", status}};
    if (!resource_version.empty()) patch["metadata"] = {{"resourceVersion", resource_version}};
    return merge_patch(type.object_path(ns, name, "status"), patch);
}

WriteResult Writer::set_egress_service_host(const std::string& ns, const std::string& name, const std::string& host,
                                            const std::string& resource_version) {
    return patch_status(resources::egress_services, ns, name, json{{"host", host}}, resource_version);
}

WriteResult Writer::patch_node_labels(const std::string& node,
                                      const std::map<std::string, std::optional<std::string>>& labels,
                                      const std::string& resource_version) {
    json l = json::object();
    for (const auto& [k, v] : labels)
        l[k] = v ? json(*v) : json(nullptr);
    json meta = {{"labels", l}};
    if (!resource_version.empty()) meta["resourceVersion"] = resource_version;
    return merge_patch(resources::nodes.object_path("", node), json{{"metadata", meta}});
}

WriteResult Writer::read(const ResourceType& type, const std::string& ns, const std::string& name) {
    const std::string path = type.collection_path(ns) + "?fieldSelector=" + url_encode("metadata.name=" + name);
    WriteResult w = finish(transport_->request("GET", path, "", "", nullptr, opts_.timeout));
    w.written = false;
    if (!w.ok()) return w;
    const json* items = w.object.contains("items") && w.object["items"].is_array() ? &w.object["items"] : nullptr;
    if (!items || items->empty()) {
        w.status = 404;
        w.reason = "NotFound";
        w.error = type.plural + " \"" + name + "\" not found";
        w.object = json();
        return w;
    }
    json obj = (*items)[0];
    if (!obj.contains("kind")) obj["kind"] = type.kind;
    if (!obj.contains("apiVersion")) obj["apiVersion"] = type.api_version();
    w.object = std::move(obj);
    return w;
}

WriteResult Writer::get_lease(const std::string& ns, const std::string& name) {
    WriteResult w =
        finish(transport_->request("GET", resources::leases.object_path(ns, name), "", "", nullptr, opts_.timeout));
    w.written = false;
    return w;
}

WriteResult Writer::create_lease(const std::string& ns, const json& lease) {
    json body = lease;
    body["apiVersion"] = resources::leases.api_version();
    body["kind"] = resources::leases.kind;
    return finish(transport_->request("POST", resources::leases.collection_path(ns) + kFieldManager, body.dump(), kJson,
                                      nullptr, opts_.timeout));
}

WriteResult Writer::update_lease(const std::string& ns, const json& lease) {
    std::string name;
    if (lease.contains("metadata") && lease["metadata"].contains("name") && lease["metadata"]["name"].is_string())
        name = lease["metadata"]["name"].get<std::string>();
    if (name.empty()) {
        WriteResult w;
        w.error = "update_lease: the lease has no metadata.name";
        return w;
    }
    return finish(transport_->request("PUT", resources::leases.object_path(ns, name) + kFieldManager, lease.dump(),
                                      kJson, nullptr, opts_.timeout));
}

WriteResult Writer::modify_lease(const std::string& ns, const std::string& name, const LeaseMutator& mutate) {
    int requests = 0;
    WriteResult last;
    for (int attempt = 0; attempt < std::max(1, opts_.lease_attempts); ++attempt) {
        WriteResult got = get_lease(ns, name);
        ++requests;
        bool exists = got.ok();
        if (!exists && !got.not_found()) {
            got.attempts = requests;
            return got;
        }
        json lease = exists ? got.object
                            : json{{"apiVersion", resources::leases.api_version()},
                                   {"kind", resources::leases.kind},
                                   {"metadata", {{"name", name}, {"namespace", ns}}},
                                   {"spec", json::object()}};
        if (!mutate(lease, exists)) {
            // Declined: report what was read (status 200 with the Lease, or 404 without one).
            got.written = false;
            got.attempts = requests;
            got.error.clear();
            got.reason.clear();
            return got;
        }
        last = exists ? update_lease(ns, lease) : create_lease(ns, lease);
        ++requests;
        last.attempts = requests;
        if (!last.conflict()) return last;
        logger()->debug("k8s: lease {}/{}: {} ({}); reading it again", ns, name, last.error,
                        exists ? "updated by someone else" : "created by someone else");
    }
    return last;
}

std::string format_micro_time(std::chrono::system_clock::time_point t) {
    using namespace std::chrono;
    const auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(us / 1000000);
    long frac = static_cast<long>(us % 1000000);
    if (frac < 0) {
        frac += 1000000;
        --secs;
    }
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
    return buf;
}

std::optional<std::chrono::system_clock::time_point> parse_micro_time(std::string_view s) {
    auto digits = [&](size_t pos, size_t n, int& out) {
        if (pos + n > s.size()) return false;
        out = 0;
        for (size_t i = pos; i < pos + n; ++i) {
            if (s[i] < '0' || s[i] > '9') return false;
            out = out * 10 + (s[i] - '0');
        }
        return true;
    };
    std::tm tm{};
    int y, mo, d, h, mi, se;
    if (!digits(0, 4, y) || s.size() < 19 || s[4] != '-' || !digits(5, 2, mo) || s[7] != '-' || !digits(8, 2, d) ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !digits(11, 2, h) || s[13] != ':' || !digits(14, 2, mi) ||
        s[16] != ':' || !digits(17, 2, se))
        return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
    size_t pos = 19;
    long long micros = 0;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        int n = 0;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            if (n < 6) micros = micros * 10 + (s[pos] - '0');
            ++n;
            ++pos;
        }
        if (n == 0) return std::nullopt;
        for (; n < 6; ++n)
            micros *= 10;
    }
    long offset = 0;
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        int oh, om;
        if (!digits(pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(pos + 4, 2, om))
            return std::nullopt;
        offset = (s[pos] == '-' ? -1 : 1) * (oh * 3600L + om * 60L);
        pos += 6;
    } else {
        return std::nullopt;
    }
    if (pos != s.size()) return std::nullopt;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    const std::time_t secs = timegm(&tm) - offset;
    return std::chrono::system_clock::time_point(std::chrono::seconds(secs) + std::chrono::microseconds(micros));
}

}  // namespace egw::k8s
