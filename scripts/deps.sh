#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what egw builds and tests with, from Debian 12's packages, when it is missing.
# With --image, also what scripts/image.sh builds the container image with (debootstrap, podman).
# With --demo, only what egwd and egwctl build with and scripts/demo.sh runs: no test tools, no
# compilers for the fuzz build, no npm (on a fresh two-core machine the rest takes minutes).
set -euo pipefail

# clang-14 and libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes, for the fuzz build
# (scripts/fuzz.sh, docs/testing.md).
# clang-format-14: scripts/lint.sh checks the C++ files' format with it (docs/developing.md); one
# version, since another formats some lines differently.
# ccache: meson uses it by itself when it is installed, so a machine that is kept rebuilds only
# what changed (scripts/test.sh builds twice: release and sanitized).
# valgrind: scripts/bench-instructions.sh counts the packet path's instructions with callgrind
# (deterministic, unlike Mpps on a shared machine: docs/performance.md §2);
# openssl: the TLS tests make their certificates;
# libc-ares-dev: c-ares, the DNS resolver library that resolves EgressFirewall's dnsName rules
# (control/dns, docs/architecture.md "Libraries"); dnsmasq-base: the DNS server the resolver's
# test asks (tests/unit/dns/test_resolver.cpp).
# libssl-dev: OpenSSL's libcrypto, for the HMAC-SHA256 of session sync (docs/architecture.md,
# "Libraries"); libdpdk-dev pulls it in already, named here because egw links it itself.
# dpdk-dev also brings dpdk-telemetry.py, which the telemetry test drives.
# The demo's: the build of egwd and egwctl, and the tools scripts/demo.sh and scripts/netns.sh
# run (tests/e2e/peer.py needs Python's standard library only).
demo_packages=(
  build-essential meson ninja-build pkg-config ccache
  dpdk libdpdk-dev
  nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcurl4-openssl-dev zlib1g-dev libcli11-dev
  libssl-dev libc-ares-dev
  python3 iproute2 ethtool procps
)
packages=(
  "${demo_packages[@]}"
  dpdk-dev
  libgtest-dev googletest
  valgrind openssl dnsmasq-base iputils-ping netcat-openbsd curl
  clang-14 libclang-rt-14-dev clang-format-14
  python3-yaml python3-jsonschema python3-prometheus-client prometheus
  # tests/e2e/test_confinement.py: libseccomp's Python binding loads a filter made from the
  # containers/common default seccomp profile, which golang-github-containers-common ships.
  python3-seccomp golang-github-containers-common util-linux
  # tests/e2e/test_egress_qos_e2e.py: tcpdump on the far side reports the DSCP and ECN bits that
  # arrived.
  tcpdump
)
case ${1:-} in
  "") ;;
  --image) packages+=(debootstrap podman) ;;
  --demo) packages=("${demo_packages[@]}") ;;
  *) echo "usage: $0 [--image | --demo]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = --demo ] && exit 0

# The Kubernetes OpenAPI schemas for tests/e2e/test_deploy.py: the npm package kubernetes-models,
# pinned by tests/e2e/k8s-schemas/package-lock.json (npm from Debian when the machine has none).
schemas="$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/k8s-schemas"
if [ ! -d "$schemas/node_modules/kubernetes-models" ]; then
  if ! command -v npm >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  echo "deps: npm ci in tests/e2e/k8s-schemas"
  (cd "$schemas" && npm ci --no-audit --no-fund --loglevel=error)
fi
