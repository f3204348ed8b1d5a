// SPDX-License-Identifier: Apache-2.0
//
// The metric families of the kubernetes state source: per-resource watch health from the
// reflectors (control/k8s/reflector.h) and the host election's state and write-backs
// (control/k8s_source/controller.h). They exist only when state.source is kubernetes; egwd registers
// them with Exporter::add_families(), so they are written on the metrics thread at every scrape
// from ReflectorStatus and ControllerStats copies taken under those components' own locks.
#pragma once

#include <vector>

#include "control/k8s_source/controller.h"
#include "control/k8s/reflector.h"
#include "control/metrics/exposition.h"

namespace egw::metrics {

void write_kubernetes(Writer& w, const std::vector<k8s::ReflectorStatus>& resources,
                      const k8s_source::ControllerStats& election);

}  // namespace egw::metrics
