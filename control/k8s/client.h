// SPDX-License-Identifier: Apache-2.0
//
// egw's Kubernetes client in one object: a Transport built from the Credentials, one Reflector per
// kind feeding the typed Cache, and a Writer. Typical use in egwd:
//
//   auto creds = k8s::load_credentials(flag_kubeconfig);      // or k8s::in_cluster()
//   k8s::Client client(creds, opts);
//   client.start();                                           // the five kinds
//   client.wait_synced(30s);
//   for (uint64_t gen = 0;;) {
//       gen = client.cache().wait_for_change(gen, 1s);
//       for (auto& c : client.cache().take_changes()) ...     // or client.cache().snapshot()
//   }
//   client.writer().set_egress_service_host(ns, name, node);
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/k8s/cache.h"
#include "control/k8s/credentials.h"
#include "control/k8s/http.h"
#include "control/k8s/reflector.h"
#include "control/k8s/writer.h"

namespace egw::k8s {

struct ClientOptions {
    HttpOptions http;
    ReflectorOptions reflector;        // timeouts, page size, backoff for every kind (its
                                       // namespace_ and selectors are set per kind from below)
    std::string watch_namespace;       // EgressServices, Services, EndpointSlices: "" = all namespaces
    std::string lease_namespace;       // Leases: "" = the credentials' namespace (all when unknown)
    std::string lease_label_selector;  // e.g. "app.kubernetes.io/name=egw"
    WriterOptions writer;
};

class Client {
public:
    // Throws CredentialError when a file named by the credentials cannot be read.
    explicit Client(Credentials creds, ClientOptions opts = {});
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Starts one reflector per kind (all five by default); the cache expects each of them.
    void start(const std::vector<model::Kind>& kinds = all_kinds());
    // Stops every reflector and the requests they have in flight.
    void stop();

    bool synced() const { return cache_.synced(); }
    bool wait_synced(std::chrono::milliseconds timeout) const { return cache_.wait_synced(timeout); }

    Cache& cache() { return cache_; }
    Writer& writer() { return writer_; }
    Transport& transport() { return *transport_; }
    const std::shared_ptr<Transport>& shared_transport() const { return transport_; }
    // One entry per running reflector (for metrics and `egwctl show`).
    std::vector<ReflectorStatus> status() const;
    // How long the cache of `kind` has been kept current without a break (broken when that kind
    // has no reflector).
    Continuity continuity(model::Kind kind) const;

    static std::vector<model::Kind> all_kinds();

private:
    ClientOptions opts_;
    std::shared_ptr<Transport> transport_;
    Cache cache_;
    Writer writer_;
    std::vector<std::unique_ptr<Reflector>> reflectors_;
};

}  // namespace egw::k8s
