// SPDX-License-Identifier: Apache-2.0
#include "control/dns/dns_name_resolver_watch.h"

#include "control/k8s/log.h"

namespace egw::dns {

using nlohmann::json;

const k8s::ResourceType kDnsNameResolvers{"network.openshift.io", "v1alpha1", "dnsnameresolvers", "DNSNameResolver",
                                          true};

namespace {

std::string key_of(const json& o) {
    const json* meta = o.is_object() && o.contains("metadata") ? &o.at("metadata") : nullptr;
    auto text = [&](const char* k) {
        return meta && meta->is_object() && meta->contains(k) && meta->at(k).is_string()
                   ? meta->at(k).get<std::string>()
                   : std::string();
    };
    return text("namespace") + "/" + text("name");
}

std::string resource_version_of(const json& o) {
    const json* meta = o.is_object() && o.contains("metadata") ? &o.at("metadata") : nullptr;
    if (meta && meta->is_object() && meta->contains("resourceVersion") && meta->at("resourceVersion").is_string())
        return meta->at("resourceVersion").get<std::string>();
    return "";
}

}  // namespace

DnsNameResolverWatch::DnsNameResolverWatch(std::shared_ptr<k8s::Transport> transport, std::string namespace_,
                                           k8s::ReflectorOptions opts)
    : reflector_(std::move(transport), kDnsNameResolvers, *this, [&] {
          opts.namespace_ = std::move(namespace_);
          return opts;
      }()) {}

DnsNameResolverWatch::~DnsNameResolverWatch() {
    reflector_.stop();
}

void DnsNameResolverWatch::start() {
    reflector_.start();
}

void DnsNameResolverWatch::stop() {
    reflector_.stop();
}

uint64_t DnsNameResolverWatch::generation() const {
    std::lock_guard lock(mutex_);
    return generation_;
}

std::map<std::string, std::vector<net::IpAddr>> DnsNameResolverWatch::addresses() const {
    std::lock_guard lock(mutex_);
    return addresses_;
}

size_t DnsNameResolverWatch::objects() const {
    std::lock_guard lock(mutex_);
    return accepted_.size();
}

size_t DnsNameResolverWatch::rejected() const {
    std::lock_guard lock(mutex_);
    return rejected_.size();
}

void DnsNameResolverWatch::store(const std::string& key, const json& object) {
    try {
        accepted_[key] = parse_dns_name_resolver(object);
        rejected_.erase(key);
    } catch (const DnsNameResolverError& e) {
        accepted_.erase(key);
        const std::string rv = resource_version_of(object);
        auto [it, inserted] = rejected_.try_emplace(key, rv);
        if (inserted || it->second != rv) {
            it->second = rv;
            k8s::logger()->warn("DNSNameResolver {}: ignored: {}", key, e.what());
        }
    }
}

void DnsNameResolverWatch::recompute() {
    std::vector<DnsNameResolver> all;
    all.reserve(accepted_.size());
    for (const auto& [key, r] : accepted_)
        all.push_back(r);
    auto next = dns_name_resolver_addresses(all);
    if (next == addresses_) return;
    addresses_ = std::move(next);
    ++generation_;
}

void DnsNameResolverWatch::replace(std::vector<json>&& items, const std::string& /*resource_version*/) {
    std::lock_guard lock(mutex_);
    std::map<std::string, std::string> logged = std::move(rejected_);
    accepted_.clear();
    rejected_.clear();
    for (const json& o : items) {
        const std::string key = key_of(o);
        // An object refused before and unchanged since is not logged again.
        if (auto it = logged.find(key); it != logged.end()) rejected_.insert(*it);
        store(key, o);
    }
    recompute();
}

void DnsNameResolverWatch::apply(k8s::EventType type, json&& object) {
    std::lock_guard lock(mutex_);
    const std::string key = key_of(object);
    if (type == k8s::EventType::deleted) {
        accepted_.erase(key);
        rejected_.erase(key);
    } else {
        store(key, object);
    }
    recompute();
}

}  // namespace egw::dns
