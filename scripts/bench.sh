#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# egw's own benchmark: one worker, pre-built traffic, io-forwarding of the same packets beside
# the SNAT pipeline at 10,000 and 1,000,000 sessions, new sessions/s and memory per session; the
# same for IPv6 (NAPT66) and for a dual-stack mix (half the flows of each family), each beside
# io-forwarding of its own frames; then replies with 1, 2 and 4 workers, handed off or sent to
# their owner. BENCH_FAMILIES (default "4 6 mix") picks the tables.
# Arguments go to egw-bench (--flows, --services, --destinations, --seconds, --rounds). Each
# figure is the median of 30 rounds in which io-forwarding and SNAT take turns; the spread of
# those rounds says whether the host was quiet enough to judge by, and the last columns repeat
# the ratio and egw's cycles over the rounds in which a core check found the core the bench's alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
lcore=${BENCH_LCORE:-1}
# DPDK leaves its runtime directory for the file prefix behind (memory on a tmpfs): removed at the end.
if [ "$(id -u)" -eq 0 ]; then rundir=/var/run/dpdk; else rundir=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
trap 'rm -rf "$rundir/egw-bench"' EXIT
eal=(--no-huge -m "${BENCH_MEM_MB:-2048}" -l "$lcore" --no-pci --file-prefix egw-bench --log-level=error
     --vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1)
for family in ${BENCH_FAMILIES:-4 6 mix}; do
  build/tests/bench/egw-bench "${eal[@]}" -- --family "$family" "$@"
  echo
done
# Several workers: the hand-off fraction and the cost per reply with 1, 2 and 4 worker contexts
# taking turns on this one lcore (cost, not scaling: docs/performance.md).
build/tests/bench/egw-bench "${eal[@]}" -- --workers "${BENCH_WORKERS:-1,2,4}" --flows 10000 --seconds "${BENCH_SECONDS:-3}"
echo
# The host's memory at the time of the run: the 1,000,000-session rows read two random lines per
# packet from a table of ~100 MiB (docs/performance.md §1).
taskset -c "$lcore" build/tests/bench/egw-memory-bench --sizes 1,16,64,256
