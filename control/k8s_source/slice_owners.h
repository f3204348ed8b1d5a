// SPDX-License-Identifier: Apache-2.0
//
// Which Service each EndpointSlice belongs to, kept up to date change by change, so that an
// endpoint change touches only its Service (and the Service it left, when its label changed).
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/model/objects.h"
#include "control/model/rules.h"

namespace egw::k8s_source {

class SliceOwners {
public:
    // Forgets everything and indexes every slice of `objects`.
    void rebuild(const model::ObjectSet& objects);
    // Brings the slice `slice_key` ("namespace/name") up to date with `objects` (where it may be
    // gone) and appends to `affected` the Services whose endpoints may have changed: the one it
    // belongs to and the one it belonged to before, when they differ.
    void update(const model::ObjectSet& objects, const std::string& slice_key, std::vector<std::string>& affected);
    // The slices of Service "namespace/name" as they are in `objects`.
    std::vector<const model::EndpointSlice*> slices(const model::ObjectSet& objects,
                                                    const std::string& service_key) const;
    // A SliceIndex holding just these Services.
    model::SliceIndex index(const model::ObjectSet& objects, const std::vector<std::string>& service_keys) const;

private:
    std::unordered_map<std::string, std::string> owner_;                 // slice key -> service key
    std::unordered_map<std::string, std::set<std::string>> by_service_;  // service key -> slice keys
};

}  // namespace egw::k8s_source
