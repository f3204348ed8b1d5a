// SPDX-License-Identifier: Apache-2.0
#include "control/k8s/client.h"

#include "control/k8s/log.h"

namespace egw::k8s {

Client::Client(Credentials creds, ClientOptions opts)
    : opts_(std::move(opts)),
      transport_(std::make_shared<Transport>(std::move(creds), opts_.http)),
      writer_(transport_, opts_.writer) {
    logger()->info("k8s: API server {} ({})", transport_->credentials().server, transport_->credentials().source);
}

Client::~Client() {
    stop();
}

std::vector<model::Kind> Client::all_kinds() {
    return {model::Kind::egress_service, model::Kind::service, model::Kind::endpoint_slice, model::Kind::node,
            model::Kind::lease};
}

void Client::start(const std::vector<model::Kind>& kinds) {
    for (auto kind : kinds) {
        bool running = false;
        for (const auto& r : reflectors_)
            running = running || r->type().kind == resource_for(kind).kind;
        if (running) continue;
        ReflectorOptions ro = opts_.reflector;
        ro.label_selector.clear();
        ro.field_selector.clear();
        ro.namespace_.clear();
        if (kind == model::Kind::lease) {
            ro.namespace_ =
                opts_.lease_namespace.empty() ? transport_->credentials().namespace_ : opts_.lease_namespace;
            ro.label_selector = opts_.lease_label_selector;
        } else if (model::is_namespaced(kind)) {
            ro.namespace_ = opts_.watch_namespace;
        }
        cache_.expect(kind);
        reflectors_.push_back(std::make_unique<Reflector>(transport_, resource_for(kind), cache_.handler(kind), ro));
        reflectors_.back()->start();
    }
}

void Client::stop() {
    for (auto& r : reflectors_)
        r->stop();
}

std::vector<ReflectorStatus> Client::status() const {
    std::vector<ReflectorStatus> out;
    for (const auto& r : reflectors_)
        out.push_back(r->status());
    return out;
}

Continuity Client::continuity(model::Kind kind) const {
    for (const auto& r : reflectors_)
        if (r->type().kind == resource_for(kind).kind) return r->continuity();
    return {};
}

}  // namespace egw::k8s
