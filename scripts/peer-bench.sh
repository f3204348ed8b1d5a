#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the shared benchmark rig (shared/bench/peer-rig) with egwd plugged in as its third
# application, so egwd's row is measured in the same run as DPDK's io-forwarding and Open
# vSwitch's ct(nat). Root only (the rig runs DPDK and OVS). Environment passes through to the
# rig: FLOWS, REPS, WINDOW, WARMUP, CONFIGS, HUGE, ...
#
#   sudo scripts/peer-bench.sh                       # the rig's full run plus egwd
#   sudo FLOWS=10000 REPS=1 scripts/peer-bench.sh    # quick
#   sudo EGW_RIG_MODE=egressservice scripts/peer-bench.sh   # the same traffic through EgressServices
#
# EGW_TREE=DIR runs the egwd of another checkout, built into DIR/build beforehand, with that
# checkout's rig configuration (scripts/peer-bench-ab.sh uses it to alternate two revisions);
# without it this checkout is built (scripts/build.sh) and run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rig=${RIG:-$here/../shared/bench/peer-rig}
[ -x "$rig/run.sh" ] || [ -f "$rig/run.sh" ] || { echo "peer-bench: no rig at $rig (set RIG=...)" >&2; exit 1; }

if [ -n "${EGW_TREE:-}" ]; then
  tree=$(cd "$EGW_TREE" && pwd)
  [ -x "$tree/build/control/egwd" ] || { echo "peer-bench: no $tree/build/control/egwd (build it first)" >&2; exit 1; }
else
  tree=$here
  bash "$here/scripts/build.sh"
fi
missing=()
for p in dpdk openvswitch-switch-dpdk python3 tcpdump; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# EGW_RIG_MODE=masquerade (default): no rig source is an endpoint of a Service, so every flow
# takes egwd's default action, the same SNAT the rig asks of OVS. EGW_RIG_MODE=egressservice: the
# same sources are made endpoints of 64 LoadBalancer Services with EgressServices
# (tests/bench/rig_services.py), so the same traffic takes the per-Service path.
config=$tree/config/bench-rig.json
case "${EGW_RIG_MODE:-masquerade}" in
  masquerade) export DUT_NAME=${DUT_NAME:-egwd} ;;
  egressservice)
    gen=${WORK:-/tmp/peer-bench}/egw-egressservice
    python3 "$tree/tests/bench/rig_services.py" --config "$config" --out "$gen"
    config=$gen/egwd.json
    export DUT_NAME=${DUT_NAME:-egwd-egressservice} ;;
  *) echo "peer-bench: EGW_RIG_MODE must be masquerade or egressservice" >&2; exit 1 ;;
esac
export DUT_CMD="exec $tree/build/control/egwd \$RIG_EAL -- -c $config --mbufs \$RIG_NB_MBUFS --log-level warn"
export CONFIGS=${CONFIGS:-testpmd-io testpmd-rxonly ovs-fwd ovs-ctnat dut}
exec bash "$rig/run.sh"
