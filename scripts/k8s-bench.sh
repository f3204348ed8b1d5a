#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kubernetes state source at scale: 10,000 EgressServices with 100,000 endpoints served by the
# test API server (tests/apiserver/apiserver.py). Prints the time from start to the data plane
# programmed, and p50/p99 from one endpoint change to a policy snapshot holding it, for a restart
# (statuses already decided) and for a cold start (the leader writes every status.host).
# Arguments go to every egw-k8s-bench run (--services, --endpoints, --changes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
export EGW_SOURCE_ROOT=$PWD
echo "== restart: status.host and labels already name this gateway"
build/tests/bench/egw-k8s-bench --statuses restart "$@"
echo "== cold start: the leader decides and writes every status.host"
build/tests/bench/egw-k8s-bench --statuses cold --changes 50 "$@"
