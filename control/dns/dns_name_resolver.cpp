// SPDX-License-Identifier: Apache-2.0
#include "config/json_text.h"
#include "control/dns/dns_name_resolver.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <optional>
#include <set>

namespace egw::dns {

using nlohmann::json;

namespace {

std::string child(const std::string& path, const char* key) {
    return path + "." + key;
}

std::string element(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

std::string describe(const json& v) {
    return json_text::quote_refused(v);
}

[[noreturn]] void expected(const std::string& path, const std::string& what, const json& got) {
    throw DnsNameResolverError(path + ": expected " + what + ", got " + describe(got));
}

[[noreturn]] void missing(const std::string& path) {
    throw DnsNameResolverError(path + ": required field is missing");
}

// Present and not null.
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json& object_at(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (!v) missing(child(path, key));
    if (!v->is_object()) expected(child(path, key), "an object", *v);
    return *v;
}

const std::string& string_at(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (!v) missing(child(path, key));
    if (!v->is_string()) expected(child(path, key), "a string", *v);
    return v->get_ref<const std::string&>();
}

const json* array_at(const json& obj, const char* key, const std::string& path) {
    const json* v = field(obj, key);
    if (v && !v->is_array()) expected(child(path, key), "an array", *v);
    return v;
}

// RFC 1123 labels of 1-63 letters, digits and '-', 253 characters at most, an optional "*." in
// front (when allowed) and final dot. Lower case, without the final dot.
std::optional<std::string> normalize(std::string_view s, bool allow_wildcard) {
    std::string prefix;
    if (allow_wildcard && s.starts_with("*.")) {
        prefix = "*.";
        s.remove_prefix(2);
    }
    if (s.ends_with('.')) s.remove_suffix(1);
    if (s.empty() || s.size() > 253) return std::nullopt;
    size_t label = 0;
    std::string out = prefix;
    for (char c : s) {
        if (c == '.') {
            if (label == 0) return std::nullopt;
            label = 0;
        } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
            if (++label > 63) return std::nullopt;
        } else {
            return std::nullopt;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (label == 0) return std::nullopt;
    return out;
}

bool digits(std::string_view s, size_t at, size_t n, int& out) {
    if (at + n > s.size()) return false;
    out = 0;
    for (size_t i = at; i < at + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        out = out * 10 + (s[i] - '0');
    }
    return true;
}

// RFC 3339 date-time as Kubernetes writes metav1.Time: "2024-05-01T10:00:00Z", also with a
// fraction and a numeric offset.
std::optional<std::chrono::sys_time<std::chrono::microseconds>> parse_rfc3339(std::string_view s) {
    int y, mo, d, h, mi, sec;
    if (!digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' ||
        !digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't') || !digits(s, 11, 2, h) || s[13] != ':' ||
        !digits(s, 14, 2, mi) || s[16] != ':' || !digits(s, 17, 2, sec))
        return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
    size_t at = 19;
    std::chrono::microseconds fraction{0};
    if (s[at] == '.') {
        size_t start = ++at;
        int64_t us = 0;
        while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
            if (at - start < 6) us = us * 10 + (s[at] - '0');
            ++at;
        }
        if (at == start) return std::nullopt;
        for (size_t n = std::min<size_t>(at - start, 6); n < 6; ++n)
            us *= 10;
        fraction = std::chrono::microseconds(us);
    }
    int offset_min = 0;
    if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
        ++at;
    } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
        int oh, om;
        if (!digits(s, at + 1, 2, oh) || at + 3 >= s.size() || s[at + 3] != ':' || !digits(s, at + 4, 2, om) ||
            oh > 23 || om > 59)
            return std::nullopt;
        offset_min = (s[at] == '-' ? -1 : 1) * (oh * 60 + om);
        at += 6;
    } else {
        return std::nullopt;
    }
    if (at != s.size()) return std::nullopt;
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    const time_t t = timegm(&tm);
    return std::chrono::sys_seconds(std::chrono::seconds(t)) - std::chrono::minutes(offset_min) + fraction;
}

}  // namespace

DnsNameResolver parse_dns_name_resolver(const json& j, const std::string& path) {
    if (!j.is_object()) expected(path, "a DNSNameResolver object", j);
    const std::string& api = string_at(j, "apiVersion", path);
    if (api != "network.openshift.io/v1alpha1")
        expected(child(path, "apiVersion"), "\"network.openshift.io/v1alpha1\"", j.at("apiVersion"));
    if (string_at(j, "kind", path) != "DNSNameResolver")
        expected(child(path, "kind"), "\"DNSNameResolver\"", j.at("kind"));
    DnsNameResolver out;
    const std::string mpath = child(path, "metadata");
    const json& meta = object_at(j, "metadata", path);
    out.name = string_at(meta, "name", mpath);
    if (const json* ns = field(meta, "namespace")) {
        if (!ns->is_string()) expected(child(mpath, "namespace"), "a string", *ns);
        out.namespace_ = ns->get<std::string>();
    }
    const std::string spath = child(path, "spec");
    const json& spec = object_at(j, "spec", path);
    const std::string& written = string_at(spec, "name", spath);
    auto name = normalize(written, true);
    if (!name)
        expected(child(spath, "name"), "a DNS name like \"*.example.com.\" or \"www.example.com.\"", spec.at("name"));
    out.dns_name = *name;

    const json* status = field(j, "status");
    if (!status) return out;
    const std::string stpath = child(path, "status");
    if (!status->is_object()) expected(stpath, "an object", *status);
    const json* names = array_at(*status, "resolvedNames", stpath);
    if (!names) return out;
    const std::string npath = child(stpath, "resolvedNames");
    for (size_t i = 0; i < names->size(); ++i) {
        const std::string ipath = element(npath, i);
        const json& rn = (*names)[i];
        if (!rn.is_object()) expected(ipath, "an object", rn);
        ResolvedName r;
        const std::string& dn = string_at(rn, "dnsName", ipath);
        auto n = normalize(dn, true);
        if (!n) expected(child(ipath, "dnsName"), "a DNS name like \"www.example.com.\"", rn.at("dnsName"));
        r.dns_name = *n;
        if (const json* addrs = array_at(rn, "resolvedAddresses", ipath)) {
            const std::string apath = child(ipath, "resolvedAddresses");
            for (size_t k = 0; k < addrs->size(); ++k) {
                const std::string kpath = element(apath, k);
                const json& a = (*addrs)[k];
                if (!a.is_object()) expected(kpath, "an object", a);
                ResolverAddress ra;
                const std::string& ip = string_at(a, "ip", kpath);
                auto parsed = net::parse_ip(ip);
                if (!parsed) expected(child(kpath, "ip"), "an IPv4 or IPv6 address", a.at("ip"));
                ra.ip = *parsed;
                const json* ttl = field(a, "ttlSeconds");
                if (!ttl) missing(child(kpath, "ttlSeconds"));
                if (!ttl->is_number_integer() || ttl->get<int64_t>() < 0 || ttl->get<int64_t>() > 2147483647)
                    expected(child(kpath, "ttlSeconds"), "an integer from 0 to 2147483647", *ttl);
                ra.ttl_seconds = static_cast<uint32_t>(ttl->get<int64_t>());
                const std::string& when = string_at(a, "lastLookupTime", kpath);
                auto t = parse_rfc3339(when);
                if (!t)
                    expected(child(kpath, "lastLookupTime"), "an RFC 3339 time like \"2024-05-01T10:00:00Z\"",
                             a.at("lastLookupTime"));
                ra.last_lookup = *t;
                r.addresses.push_back(ra);
            }
        }
        out.resolved.push_back(std::move(r));
    }
    return out;
}

bool dns_name_matches(std::string_view pattern, std::string_view name) {
    if (pattern == name) return true;
    if (!pattern.starts_with("*.")) return false;
    const std::string_view suffix = pattern.substr(1);  // ".example.com"
    if (name.size() <= suffix.size() || !name.ends_with(suffix)) return false;
    const std::string_view label = name.substr(0, name.size() - suffix.size());
    return label.find('.') == std::string_view::npos;
}

std::map<std::string, std::vector<net::IpAddr>> dns_name_resolver_addresses(
    const std::vector<DnsNameResolver>& objects) {
    std::map<std::string, std::set<net::IpAddr>> merged;
    for (const DnsNameResolver& o : objects) {
        auto& set = merged[o.dns_name];
        for (const ResolvedName& r : o.resolved) {
            if (!dns_name_matches(o.dns_name, r.dns_name)) continue;
            for (const ResolverAddress& a : r.addresses)
                set.insert(a.ip);
        }
    }
    std::map<std::string, std::vector<net::IpAddr>> out;
    for (auto& [name, set] : merged)
        out[name].assign(set.begin(), set.end());
    return out;
}

std::map<std::string, std::vector<net::IpAddr>> snapshot_addresses(const Snapshot& snapshot) {
    std::map<std::string, std::vector<net::IpAddr>> out;
    for (const auto& [name, status] : snapshot) {
        auto& v = out[name];
        for (const ResolvedAddress& a : status.addresses)
            v.push_back(a.address);
    }
    return out;
}

}  // namespace egw::dns
