// SPDX-License-Identifier: Apache-2.0
//
// Fuzz target: a Kubernetes watch response body (control/k8s/watch_stream.*) as the reflector
// consumes it: the bytes are fed to an EventSplitter in chunks whose sizes the input chooses,
// each object becomes a WatchEvent, and ADDED/MODIFIED/DELETED go into the typed cache through
// the handler a Reflector writes into (which parses them with the object model).
//
// Input: byte 0 picks the resource kind (and a small object size limit), bytes 1-4 the chunk
// sizes (cycled; 0 = the rest at once), the rest is the body.
//
// Invariant: the splitter's output does not depend on where the chunks cut the body. The same
// objects come out, in the same order, and the error (if any) comes after the same objects, as
// when the whole body is fed at once.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "control/k8s/cache.h"
#include "control/k8s/log.h"
#include "control/k8s/watch_stream.h"
#include "control/k8s_source/gateway_facts.h"
#include "tests/fuzz/fuzz.h"

namespace {

using egw::k8s::EventSplitter;
using egw::k8s::StreamError;

struct Split {
    std::vector<std::string> objects;  // dumped
    bool error = false;
};

// Feeds `body` in chunks of the sizes in `sizes` (cycled); stops at the first StreamError, as
// the reflector ends the watch there.
Split split(const std::string& body, const uint8_t* sizes, size_t n_sizes, size_t limit,
            std::vector<nlohmann::json>* keep) {
    Split out;
    EventSplitter sp(limit);
    size_t at = 0, k = 0;
    try {
        while (at < body.size()) {
            size_t len = n_sizes ? sizes[k++ % n_sizes] : 0;
            if (len == 0 || len > body.size() - at) len = body.size() - at;
            sp.feed(std::string_view(body).substr(at, len), [&](nlohmann::json&& j) {
                out.objects.push_back(j.dump());
                if (keep) keep->push_back(std::move(j));
            });
            at += len;
        }
    } catch (const StreamError&) {
        out.error = true;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // The cache logs every object the model rejects; a fuzzer makes millions.
    egw::k8s::logger()->set_level(spdlog::level::off);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace egw;
    static bool quiet = (LLVMFuzzerInitialize(nullptr, nullptr), true);
    (void)quiet;
    fuzz::Reader in(data, size);
    const uint8_t sel = in.byte();
    uint8_t sizes[4];
    for (auto& s : sizes)
        s = in.byte();
    const std::string body = in.take();
    static const model::Kind kKinds[] = {model::Kind::service, model::Kind::endpoint_slice, model::Kind::node,
                                         model::Kind::egress_service, model::Kind::lease};
    const model::Kind kind = kKinds[(sel & 0x7f) % 5];
    const size_t limit = sel & 0x80 ? 200 : size_t{256} << 20;

    std::vector<nlohmann::json> objects;
    Split chunked = split(body, sizes, 4, limit, &objects);
    Split whole = split(body, nullptr, 0, limit, nullptr);
    if (chunked.objects != whole.objects || chunked.error != whole.error)
        fuzz::fail("the splitter's output depends on the chunk boundaries: " + std::to_string(chunked.objects.size()) +
                   " objects (error " + std::to_string(chunked.error) + ") in chunks, " +
                   std::to_string(whole.objects.size()) + " (error " + std::to_string(whole.error) + ") whole");

    // What the reflector does with each object.
    k8s::Cache cache;
    cache.expect(kind);
    const k8s::ResourceType& type = k8s::resource_for(kind);
    k8s::ReflectorHandler& handler = cache.handler(kind);
    handler.replace({}, "1");
    for (auto& j : objects) {
        k8s::WatchEvent ev;
        try {
            ev = k8s::to_watch_event(std::move(j));
        } catch (const StreamError&) {
            break;
        }
        if (ev.type == k8s::EventType::bookmark || ev.type == k8s::EventType::error) continue;
        auto m = ev.object.find("metadata");
        if (m == ev.object.end() || !m->is_object() || !m->contains("resourceVersion") ||
            !(*m)["resourceVersion"].is_string())
            break;  // "an event has no resourceVersion": the watch ends
        if (!ev.object.contains("kind")) ev.object["kind"] = type.kind;
        if (!ev.object.contains("apiVersion")) ev.object["apiVersion"] = type.api_version();
        handler.apply(ev.type, std::move(ev.object));
    }
    if (!cache.synced()) fuzz::fail("the cache is not synced after its list");
    model::ObjectSet snap = cache.snapshot();
    std::vector<k8s::Change> changes = cache.take_changes();
    // A Lease's annotations as the EgressIP leader reads them: usable facts say themselves again
    // the same way; unusable ones host nothing.
    for (const auto& [key, lease] : snap.leases) {
        k8s_source::DecodedGatewayFacts d = k8s_source::decode_gateway_facts(lease.annotations);
        if (!d.error.empty()) {
            if (!d.facts.subnets.empty() || d.facts.capacity != size_t{0})
                fuzz::fail("unusable EgressIP facts still offer subnets or capacity: " + d.error);
            continue;
        }
        k8s_source::DecodedGatewayFacts again =
            k8s_source::decode_gateway_facts(k8s_source::encode_gateway_facts(d.facts));
        if (!again.error.empty() || again.facts != d.facts)
            fuzz::fail("EgressIP facts do not read back as written: " + again.error);
    }
    (void)changes;
    return 0;
}
