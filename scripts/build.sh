#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures (once) and builds egw into ./build. Under CI=true warnings are errors (-Dwerror=true):
# main builds warning-free with Debian 12's gcc 12, and CI keeps it so; a user's build with
# another compiler, whose new warnings would otherwise stop it, is left as it is.
#
#   scripts/build.sh           everything: egwd, egwctl, the tests and the benchmarks (build/)
#   scripts/build.sh --demo    egwd and egwctl only, in build-demo/ (-Dtests=false -Dbench=false),
#                              with only the packages they need (scripts/deps.sh --demo)
#
# The demo's build has a directory of its own so that build/ keeps every target: scripts/test.sh
# configures nothing once build/ exists.
set -euo pipefail
cd "$(dirname "$0")/.."
werror=false
[ "${CI:-}" = true ] && werror=true
case ${1:-} in
  "")
    bash scripts/deps.sh
    if [ -f build/build.ninja ]; then
      [ "$werror" = true ] && meson configure build -Dwerror=true
    else
      meson setup build --buildtype=release -Dwerror=$werror
    fi
    ninja -C build
    ;;
  --demo)
    bash scripts/deps.sh --demo
    if [ ! -f build-demo/build.ninja ]; then
      meson setup build-demo --buildtype=release -Dwerror=$werror -Dtests=false -Dbench=false
    fi
    ninja -C build-demo control/egwd control/egwctl
    ;;
  *)
    echo "usage: $0 [--demo]" >&2
    exit 2
    ;;
esac
