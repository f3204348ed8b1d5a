// SPDX-License-Identifier: Apache-2.0
//
// A Reflector keeps a handler in step with one resource of the API server, on its own thread:
//
//   list (paged with limit/continue) -> handler.replace(items, listRV)
//   watch from listRV with allowWatchBookmarks -> handler.apply(event) for each event
//   the stream ends (server timeout, connection cut, even mid-event) -> watch again from the
//       last resourceVersion seen in an event or a BOOKMARK
//   410 Gone (HTTP status or ERROR event) -> list again, then watch from the new listRV
//   any other failure -> wait (exponential backoff with jitter) and retry the same step; a wait
//       after an outage (no response, 5xx, 429) ends early, with the backoff reset, as soon as the
//       server answers another request of the same Transport; a refusal (401, 403, ...) retries
//       at least every refusal_grace / 4 until it has lasted refusal_grace, when it becomes a
//       verdict (status().refused)
//   a watch opened with 2xx ends the failure streak as status() reports it (failing, refused)
//
// Failures are logged once per streak (with the delay before the next try), and the recovery
// once. It works on raw JSON: objects are handed over as the server sent them, with kind and
// apiVersion filled in where a list left them out.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/k8s/backoff.h"
#include "control/k8s/http.h"
#include "control/k8s/resources.h"
#include "control/k8s/watch_stream.h"

namespace egw::k8s {

struct ReflectorOptions {
    std::string namespace_;  // "" = all namespaces
    std::string label_selector;
    std::string field_selector;
    unsigned page_size = 500;                       // list limit; 0 = unpaged
    std::chrono::seconds watch_timeout{300};        // each watch asks timeoutSeconds in [t, 2t)
    std::chrono::milliseconds list_timeout{60000};  // per list page
    std::chrono::milliseconds backoff_initial{250};
    std::chrono::milliseconds backoff_max{30000};
    std::chrono::seconds relist_period{0};  // periodic full list; 0 = only after 410
    // A refusal (refused_by_server) is a verdict only once it has lasted this long: a restarted
    // kube-apiserver answers 403 for a moment, until its RBAC informers are filled.
    std::chrono::milliseconds refusal_grace{5000};
};

// Receives what a Reflector learns. Called on the reflector's thread, never concurrently.
class ReflectorHandler {
public:
    virtual ~ReflectorHandler() = default;
    // A complete list: everything the handler knows of this resource is replaced by `items`.
    virtual void replace(std::vector<nlohmann::json>&& items, const std::string& resource_version) = 0;
    // One watch event: added, modified or deleted.
    virtual void apply(EventType type, nlohmann::json&& object) = 0;
    // A BOOKMARK: nothing changed up to resource_version.
    virtual void bookmark(const std::string& resource_version) { (void)resource_version; }
};

struct ReflectorStatus {
    std::string name;              // "nodes", "leases in egw"
    std::string resource;          // the plural alone: "nodes", "leases" (a metric label)
    bool synced = false;           // the first list has been handed over
    bool watching = false;         // a watch stream is open
    bool failing = false;          // in a failure streak
    std::string resource_version;  // the last one seen
    uint64_t lists = 0;            // complete lists (the first one included)
    uint64_t list_failures = 0;    // list attempts that failed (each retry counts)
    uint64_t watches = 0;          // watch streams opened (2xx)
    // Why each watch ended, so that another began: every watch attempt ends in exactly one of these.
    uint64_t expired = 0;         // 410 (HTTP or ERROR event): a new list follows
    uint64_t watch_closed = 0;    // the server ended the stream cleanly (its timeoutSeconds)
    uint64_t watch_failures = 0;  // refused, cut, HTTP error or an unreadable event
    uint64_t events = 0;          // ADDED/MODIFIED/DELETED handed over
    uint64_t bookmarks = 0;
    uint64_t failures = 0;  // failed attempts, list and watch (each retry counts)
    // Until when the handler is known to have been current (Unix seconds; 0 before the first list):
    // the end of the last list, or of the last watch stream. While a stream is open it is "now",
    // which status() fills in, so time() minus it is how stale the cache may be.
    double current_until = 0;
    std::string last_error;
    long failure_status = 0;  // HTTP status of the last failure (0: no response); while failing
    // Refused by the server (refused_by_server) on every attempt for at least refusal_grace, the
    // last attempt included: retrying is not expected to help.
    bool refused = false;
};

// A failure the server decided (401, 403, 404, 422, ...), as opposed to an outage (no response,
// 5xx, 429) or a routine 409/410: retrying will not help until someone changes something.
bool refused_by_server(long status);

// How long the handler has been kept current without a break. A stretch breaks on a failed list or
// watch, on a 410, and when more than a second passes between the end of one watch stream and the
// opening of the next; it starts again once a list is handed over or a watch is open.
struct Continuity {
    std::optional<std::chrono::steady_clock::time_point> since;  // nullopt while broken
    uint64_t breaks = 0;                                         // stretches ended so far
};

class Reflector {
public:
    Reflector(std::shared_ptr<Transport> transport, ResourceType type, ReflectorHandler& handler,
              ReflectorOptions opts = {});
    ~Reflector();
    Reflector(const Reflector&) = delete;
    Reflector& operator=(const Reflector&) = delete;

    void start();
    // Stops the thread and any request in progress; returns once it has stopped.
    void stop();

    bool synced() const { return synced_.load(); }
    ReflectorStatus status() const;
    Continuity continuity() const;
    const ResourceType& type() const { return type_; }

private:
    enum class Outcome { ok, expired, failed, stopped };

    void run();
    Outcome list(std::vector<nlohmann::json>& items, std::string& rv, std::string& error);
    Outcome watch(const std::string& from_rv, std::string& error);
    void fill_kind(nlohmann::json& obj) const;
    std::string selectors() const;
    std::string explain(const Response& r) const;
    void failure(const char* what, const std::string& error);
    void recovered(const char* what);
    bool sleep_for(std::chrono::milliseconds d);
    // sleep_for(d), cut short (after at least 100 ms) when the transport's answers() moves past `seen`.
    // True when cut short.
    bool sleep_until_answer(std::chrono::milliseconds d, uint64_t seen);
    void break_stretch();
    void mend_stretch(std::chrono::steady_clock::time_point now);

    std::shared_ptr<Transport> transport_;
    ResourceType type_;
    ReflectorHandler& handler_;
    ReflectorOptions opts_;
    std::string name_;

    std::thread thread_;
    Cancel cancel_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> synced_{false};
    std::mutex sleep_mu_;
    std::condition_variable sleep_cv_;

    Backoff backoff_;
    unsigned streak_ = 0;   // failures in a row (reflector thread only)
    long fail_status_ = 0;  // HTTP status of the failure being reported (reflector thread only)
    // The first refusal since the last 2xx (reflector thread only).
    std::optional<std::chrono::steady_clock::time_point> refused_since_;
    // Continuity (steady_clock nanoseconds; since_ns_ 0 = broken).
    std::atomic<int64_t> since_ns_{0};
    std::atomic<int64_t> current_ns_{0};  // the end of the last list or watch stream
    std::atomic<uint64_t> breaks_{0};
    mutable std::mutex mu_;  // guards status_
    ReflectorStatus status_;
};

}  // namespace egw::k8s
