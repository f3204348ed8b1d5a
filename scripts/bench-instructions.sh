#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per packet of egw's pipeline, counted by valgrind's callgrind on egw-bench with a
# fixed packet count. Unlike Mpps these counts do not move with what else the machine runs, so
# two builds compare on a loaded machine (docs/performance.md §2). They are not cycles: cache
# misses (what dominates at 1,000,000 sessions) and branch mispredictions do not show in them.
#
#   scripts/bench-instructions.sh [BUILD_DIR]      # FLOWS=10000 PACKETS=64000 FAMILY=4 SEED=1 by default
#
# FAMILY=6 counts IPv6 traffic (NAPT66), FAMILY=mix half IPv4 and half IPv6 flows (egw-bench
# --family); a BUILD_DIR whose egw-bench predates --family (IPv4 only) is run without it.
# Prints, per packet: io-forwarding (make the frame as a pcap replay does, transmit to
# net_null), SNAT (the same plus egw's pipeline), their difference (egw's own), each stage of
# the established pass, and the first pass per new session. egw-bench calls phase_boundary()
# between its phases and callgrind dumps a profile part at each call: parts 2, 4 and 5 are the
# first pass, io-forward and SNAT (tests/bench/egw_bench.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
flows=${FLOWS:-10000}
packets=${PACKETS:-64000}
family=${FAMILY:-4}
command -v valgrind >/dev/null || { echo "bench-instructions: needs valgrind (scripts/deps.sh installs it)" >&2; exit 1; }
[ -x "$build/tests/bench/egw-bench" ] || { echo "bench-instructions: build $build/tests/bench/egw-bench first" >&2; exit 1; }
out=$(mktemp -d)
prefix="egw-binstr-$$"
# The run's files, and the runtime directory DPDK made for its file prefix (where DPDK puts it).
if [ "$(id -u)" -eq 0 ]; then rundir=/var/run/dpdk; else rundir=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
trap 'rm -rf "$out" "$rundir/$prefix"' EXIT
eal=(--no-huge -m 1024 -l 0 --no-pci --file-prefix "$prefix" --log-level=error
     --vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1)
# A fixed hash seed (SEED, 1 by default) so that two builds put the same flows in the same
# buckets: with random ones the lookup's count moved by 16 per packet from one run to the next.
seed_arg=()
if grep -q -- '--seed' "$build/tests/bench/egw-bench"; then
  seed_arg=(--seed "${SEED:-1}")
fi
family_arg=()
if grep -q -- '--family' "$build/tests/bench/egw-bench"; then
  family_arg=(--family "$family")
elif [ "$family" != 4 ]; then
  echo "bench-instructions: $build/tests/bench/egw-bench has no --family (IPv4 only)" >&2
  exit 1
fi
if ! valgrind --tool=callgrind --callgrind-out-file="$out/cg" --dump-before='*phase_boundary*' \
     "$build/tests/bench/egw-bench" "${eal[@]}" -- --flows "$flows" --packets "$packets" "${family_arg[@]}" "${seed_arg[@]}" \
     >"$out/bench.txt" 2>"$out/valgrind.txt"; then
  cat "$out/bench.txt" "$out/valgrind.txt" >&2
  exit 1
fi
total() { awk '/^summary:/ { print $2 }' "$1"; }
# Inclusive instructions of the function matching $2 in part $1 (the largest, when several match).
incl() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk -v pat="$2" '$0 ~ pat { gsub(/,/, "", $1); if ($1 + 0 > best) best = $1 + 0 } END { print best + 0 }'
}
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", a / n }'; }
n=$(( (packets + 31) / 32 * 32 ))
first=$(total "$out/cg.2")
io=$(total "$out/cg.4")
snat=$(total "$out/cg.5")
case $family in 4) what="IPv4" ;; 6) what="IPv6 (NAPT66)" ;; *) what="dual-stack mix (half IPv4, half IPv6)" ;; esac
echo "egw-bench under callgrind: $flows flows, $what, $n packets per replay; instructions per packet"
echo
echo "| measure | instructions/packet |"
echo "|---|---:|"
echo "| io-forward (make the frame, transmit) | $(per "$io" "$n") |"
echo "| SNAT (the same + egw's pipeline) | $(per "$snat" "$n") |"
echo "| egw's own (SNAT - io-forward) | $(per $((snat - io)) "$n") |"
for f in stage_input stage_nat_lookup stage_nat_fast stage_output worker_flush; do
  echo "| $f | $(per "$(incl "$out/cg.5" "egw::dp::$f\\(")" "$n") |"
done
echo "| first pass, per new session (frame + pipeline + create) | $(per "$first" "$flows") |"
echo
echo "io-forward / SNAT in instructions: $(awk -v a="$io" -v b="$snat" 'BEGIN { printf "%.1f %%", 100 * a / b }')"
