#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures (once) and builds egw into ./build. Under CI=true warnings are errors (-Dwerror=true):
# main builds warning-free with Debian 12's gcc 12, and CI keeps it so; a user's build with
# another compiler, whose new warnings would otherwise stop it, is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
werror=false
[ "${CI:-}" = true ] && werror=true
if [ -f build/build.ninja ]; then
  [ "$werror" = true ] && meson configure build -Dwerror=true
else
  meson setup build --buildtype=release -Dwerror=$werror
fi
ninja -C build
