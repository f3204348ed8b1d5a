// SPDX-License-Identifier: Apache-2.0
//
// The metric families of session sync (control/sync/transport.h): datagrams, events and bytes
// each way, the peers' links (up, resends, losses, acknowledgement lag), refusals and dropped
// events by reason, the standby table per Service and the reserved ports. Only with a `sync`
// section; egwd registers them with Exporter::add_families(), and they are written on the
// metrics thread from a SyncServiceStats copy taken under the sync thread's lock.
#pragma once

#include "control/metrics/exposition.h"
#include "control/sync/transport.h"

namespace egw::metrics {

void write_sync(Writer& w, const sync::SyncServiceStats& s);

}  // namespace egw::metrics
