#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kubernetes state source at scale: 10,000 EgressServices with 100,000 endpoints served by the
# test API server (tests/apiserver/apiserver.py). Prints the time from start to the data plane
# programmed, and p50/p99 from one endpoint change to a policy snapshot holding it, for a restart
# (statuses already decided) and for a cold start (the leader writes every status.host); then three
# gateways (three control planes, one leader): lists -> programmed, create -> programmed and
# change -> programmed p50/p99, a node failure's moves, and the heap per object.
# Arguments go to every egw-k8s-bench run (--services, --endpoints, --changes, --creates).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
export EGW_SOURCE_ROOT=$PWD
echo "== restart: status.host and labels already name this gateway"
build/tests/bench/egw-k8s-bench --statuses restart "$@"
echo "== cold start: the leader decides and writes every status.host"
build/tests/bench/egw-k8s-bench --statuses cold --changes 50 "$@"
echo "== three gateways: hosts already decided (a restart), then creates, changes and a node failure"
build/tests/bench/egw-k8s-bench --gateways 3 --statuses restart "$@"
