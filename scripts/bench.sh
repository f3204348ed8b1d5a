#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# egw's own benchmark: one worker, pre-built traffic, io-forwarding of the same packets beside
# the SNAT pipeline at 10,000 and 1,000,000 sessions, new sessions/s and memory per session.
# Arguments go to egw-bench (--flows, --services, --destinations, --seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
lcore=${BENCH_LCORE:-1}
exec build/tests/bench/egw-bench --no-huge -m "${BENCH_MEM_MB:-2048}" -l "$lcore" --no-pci --file-prefix egw-bench \
  --log-level=error --vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1 -- "$@"
