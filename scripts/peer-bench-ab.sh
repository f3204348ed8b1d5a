#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two revisions of egwd on the shared rig, run in turns, so that the host's drift (10-20 % in
# testpmd's own rate between runs an hour apart, docs/performance.md §4) falls on both alike.
# Root only, as scripts/peer-bench.sh.
#
#   sudo scripts/peer-bench-ab.sh BASE NEW          # e.g. main HEAD, or two commit ids
#   sudo ROUNDS=5 FLOWS=10000 scripts/peer-bench-ab.sh main my-branch
#   sudo EGW_RIG_MODE=egressservice scripts/peer-bench-ab.sh BASE NEW
#
# Each revision is checked out (a detached git worktree) and its egwd built into its own build
# directory under AB_WORK (default /tmp/egw-peer-bench-ab; both are removed at the end unless
# KEEP=1, and reused when they are there). Each round runs scripts/peer-bench.sh once per
# revision with CONFIGS="testpmd-io dut" REPS=1, BASE first in odd rounds and NEW first in even
# ones. Every egwd result is paired with the testpmd-io result of the same run and flow count.
# Prints each run's cycles per packet and share of io-forwarding, and their medians per revision.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: scripts/peer-bench-ab.sh BASE NEW   (two git revisions)" >&2; exit 2; }
rounds=${ROUNDS:-3}
work=${AB_WORK:-/tmp/egw-peer-bench-ab}
export FLOWS=${FLOWS:-10000 1000000}
export WINDOW=${WINDOW:-8}

revs=("$1" "$2")
shas=()
for rev in "${revs[@]}"; do
  sha=$(git -C "$here" rev-parse --verify --quiet "$rev^{commit}") ||
    { echo "peer-bench-ab: $rev is not a revision of $here" >&2; exit 2; }
  shas+=("$sha")
done
bash "$here/scripts/deps.sh"
mkdir -p "$work"
labels=(base new)
trees=()
cleanup() {
  [ "${KEEP:-0}" = 1 ] && return
  for tree in "${trees[@]}"; do git -C "$here" worktree remove --force "$tree" 2>/dev/null || true; done
}
trap cleanup EXIT
for k in 0 1; do
  rev=${revs[$k]}
  sha=${shas[$k]}
  tree=$work/${labels[$k]}-${sha:0:12}
  [ -d "$tree" ] || git -C "$here" worktree add --detach "$tree" "$sha" >/dev/null
  trees+=("$tree")
  [ -f "$tree/build/build.ninja" ] || meson setup "$tree/build" "$tree" --buildtype=release >/dev/null
  ninja -C "$tree/build" control/egwd >/dev/null
  echo "peer-bench-ab: ${labels[$k]} = $rev ($sha), built in $tree/build"
done

log=$work/results-$(date -u +%Y%m%d-%H%M%S).log
: > "$log"
for round in $(seq 1 "$rounds"); do
  order=(0 1)
  [ $((round % 2)) -eq 0 ] && order=(1 0)
  for k in "${order[@]}"; do
    echo "peer-bench-ab: round $round of $rounds, ${labels[$k]}"
    before=$(wc -l < "$log")
    # A failed run stops the comparison: a pairing with one revision's runs missing would mislead.
    DUT_NAME=egwd-${labels[$k]} EGW_TREE=${trees[$k]} CONFIGS="testpmd-io dut" REPS=1 \
      bash "$here/scripts/peer-bench.sh" >> "$log" 2>&1 ||
      { echo "peer-bench-ab: the rig failed for ${labels[$k]}, see $log" >&2; exit 1; }
    tail -n +"$((before + 1))" "$log" | grep ' result ' || true
  done
done

python3 - "$log" <<'EOF'
import re, statistics, sys
line = re.compile(r"result (\S+) flows=(\d+) rep=\d+: ([\d.]+) Mpps .*?tsc=(\d+)")
io = {}
runs = {}  # (revision, flows) -> [(cycles, share of io)]
for text in open(sys.argv[1]):
    m = line.search(text)
    if not m:
        continue
    name, flows, mpps, tsc = m.group(1), int(m.group(2)), float(m.group(3)), int(m.group(4))
    if name == "testpmd-io":
        io[flows] = mpps
    elif name.startswith("egwd-") and flows in io:
        runs.setdefault((name[5:], flows), []).append((tsc, 100 * mpps / io.pop(flows)))
if not runs:
    sys.exit("peer-bench-ab: no paired results in " + sys.argv[1])
print("| revision | flows | egwd cycles/pkt, each run | median | % of testpmd-io, each run | median |")
print("|---|---:|---|---:|---|---:|")
for (rev, flows), r in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    cycles = [c for c, _ in r]
    shares = [s for _, s in r]
    print(f"| {rev} | {flows:,} | {', '.join(map(str, cycles))} | {statistics.median(cycles):g} | "
          f"{', '.join(f'{s:.1f}' for s in shares)} | {statistics.median(shares):.1f} |")
print(f"(log: {sys.argv[1]})")
EOF
