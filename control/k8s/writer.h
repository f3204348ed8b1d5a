// SPDX-License-Identifier: Apache-2.0
//
// What egw writes back to the API server: EgressService status (a JSON merge patch on the status
// subresource, so spec is never touched), node labels (a merge patch on the node), and Leases
// (get, create, update with a resourceVersion precondition; a 409 re-reads and retries).
// Every call is one bounded request (or a bounded series for modify_lease); the caller decides
// whether and when to retry a failure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "control/k8s/http.h"
#include "control/k8s/resources.h"

namespace egw::k8s {

struct WriteResult {
    long status = 0;        // HTTP status of the last request, 0 when no response came
    nlohmann::json object;  // the object as the server returned it (when ok())
    std::string error;      // describe() of the failure, "" when ok()
    std::string reason;     // the Status reason of a failure ("Conflict", "NotFound", ...)
    int attempts = 0;       // requests made
    bool written = false;   // modify_lease: false when the mutator declined to write

    bool ok() const { return error.empty() && status >= 200 && status < 300; }
    bool conflict() const { return status == 409; }
    bool not_found() const { return status == 404; }
};

struct WriterOptions {
    std::chrono::milliseconds timeout{10000};  // per request
    int lease_attempts = 5;                    // modify_lease: reads+writes before giving up
};

class Writer {
public:
    explicit Writer(std::shared_ptr<Transport> transport, WriterOptions opts = {});

    // PATCH .../NAME/status with application/merge-patch+json {"status": status}. A non-empty
    // resource_version is sent as a precondition (409 when the object changed since).
    WriteResult patch_status(const ResourceType& type, const std::string& ns, const std::string& name,
                             const nlohmann::json& status, const std::string& resource_version = "");
    // status.host of an EgressService ("" = nothing serves it); conditional on resource_version
    // when one is given.
    WriteResult set_egress_service_host(const std::string& ns, const std::string& name, const std::string& host,
                                        const std::string& resource_version = "");
    // PATCH the node's labels: a value sets the label, nullopt removes it. Others are untouched.
    // Conditional on resource_version when one is given (409 when the node changed since).
    WriteResult patch_node_labels(const std::string& node,
                                  const std::map<std::string, std::optional<std::string>>& labels,
                                  const std::string& resource_version = "");
    // A consistent read of one object (written = false; 404 when there is none): the re-read after
    // a conditional write got 409. A list with fieldSelector metadata.name=NAME, because egwd's
    // RBAC lets it list and watch EgressServices and Nodes but not get them.
    WriteResult read(const ResourceType& type, const std::string& ns, const std::string& name);
    // Any JSON merge patch (path as in ResourceType::object_path()).
    WriteResult merge_patch(const std::string& path, const nlohmann::json& patch);

    WriteResult get_lease(const std::string& ns, const std::string& name);
    // POST; 409 AlreadyExists when it exists.
    WriteResult create_lease(const std::string& ns, const nlohmann::json& lease);
    // PUT with the lease's metadata.resourceVersion; 409 Conflict when someone wrote it since.
    WriteResult update_lease(const std::string& ns, const nlohmann::json& lease);

    // Read-modify-write of a Lease. `mutate(lease, exists)` gets the current Lease (or, when
    // absent, a new one with apiVersion, kind, name and namespace set and exists = false), edits it
    // and returns true to write it (false: leave it, result.written = false). The write is a
    // create when it was absent and an update with the read resourceVersion otherwise; a 409
    // (someone else created or updated it in between) re-reads and calls mutate again, up to
    // WriterOptions::lease_attempts times.
    using LeaseMutator = std::function<bool(nlohmann::json& lease, bool exists)>;
    WriteResult modify_lease(const std::string& ns, const std::string& name, const LeaseMutator& mutate);

private:
    WriteResult finish(Response&& r, int attempts = 1);

    std::shared_ptr<Transport> transport_;
    WriterOptions opts_;
};

// Kubernetes MicroTime (RFC 3339 in UTC with microseconds: "2024-05-01T10:00:00.123456Z"), as
// Lease acquireTime and renewTime are written.
std::string format_micro_time(std::chrono::system_clock::time_point t);
// Parses RFC 3339 (any fraction, 'Z' or a +hh:mm offset); nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> parse_micro_time(std::string_view s);

}  // namespace egw::k8s
