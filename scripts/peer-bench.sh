#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the shared benchmark rig (shared/bench/peer-rig) with egwd plugged in as its third
# application, so egwd's row is measured in the same run as DPDK's io-forwarding and Open
# vSwitch's ct(nat). Root only (the rig runs DPDK and OVS). Environment passes through to the
# rig: FLOWS, REPS, WINDOW, WARMUP, CONFIGS, HUGE, ...
#
#   sudo scripts/peer-bench.sh                       # the rig's full run plus egwd
#   sudo FLOWS=10000 REPS=1 scripts/peer-bench.sh    # quick
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rig=${RIG:-$here/../shared/bench/peer-rig}
[ -x "$rig/run.sh" ] || [ -f "$rig/run.sh" ] || { echo "peer-bench: no rig at $rig (set RIG=...)" >&2; exit 1; }

bash "$here/scripts/build.sh"
missing=()
for p in dpdk openvswitch-switch-dpdk python3 tcpdump; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

export DUT_NAME=${DUT_NAME:-egwd}
export DUT_CMD="exec $here/build/control/egwd \$RIG_EAL -- -c $here/config/bench-rig.json --mbufs \$RIG_NB_MBUFS --log-level warn"
export CONFIGS=${CONFIGS:-testpmd-io testpmd-rxonly ovs-fwd ovs-ctnat dut}
exec bash "$rig/run.sh"
