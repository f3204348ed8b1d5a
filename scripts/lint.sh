#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks what review should not have to: every file but JSON, Markdown and fuzz inputs starts
# with an SPDX licence line (meson.build files included), dataplane/ never includes control/,
# workers bump their counters with count(), and the C++ files (all of them, the paths in
# `formatted` below) are as clang-format 14 formats them with .clang-format.
#   scripts/lint.sh                   the checks above, on every file git knows
#   scripts/lint.sh --format FILE...  also the format check on FILE..., even outside `formatted`
# Exit status 1 when something is wrong, with one line per problem (docs/developing.md says how
# to fix each).
set -euo pipefail
cd "$(dirname "$0")/.."

problems=0
report() { echo "lint: $*"; problems=$((problems + 1)); }

# 1. SPDX in the first three lines of every file git knows, but JSON (it has no comments), Markdown
#    (prose, under the repository's licence) and the fuzz corpora (inputs, byte for byte).
while IFS= read -r f; do
  head -n 3 "$f" | grep -q "SPDX-License-Identifier: " || report "$f: no SPDX-License-Identifier in its first lines"
done < <(git ls-files | grep -vE '\.(json|md)$|^tests/fuzz/corpus/')

# 2. The data plane never includes the control plane (docs/architecture.md).
while IFS= read -r hit; do
  report "$hit: dataplane/ includes control/"
done < <(git ls-files 'dataplane/*' | xargs grep -nE '^\s*#\s*include\s*["<](\.\./)*control/' || true)

# 3. Worker counters are bumped with dp::count() (dataplane/counter.h): other threads load them
#    atomically, so a plain ++ or += on one is a data race (ThreadSanitizer's build-tsan run only
#    sees the counters its tests reach; this sees them all).
while IFS= read -r hit; do
  report "$hit: bump worker counters with count() (dataplane/counter.h), not ++ or +="
done < <(git ls-files 'dataplane/*' | xargs grep -nE '(\+\+\s*(w\.|\bsc\.)[a-z_.]*counters|(\+\+\s*\bsc\.)|(counters(\[[^]]*\])?\.[a-z_]+(\[[^]]*\])?\s*(\+\+|\+=))|(\bsc\.[a-z_]+\s*(\+\+|\+=)))' || true)

# 4. Formatting: the *.cpp and *.h files git knows under these paths (git pathspecs) are kept as
#    clang-format 14 formats them with .clang-format. Today that is the whole tree; a path that
#    must stay as it is (generated or vendored code) would be excluded here with ':!path'.
formatted=(.)
# One version, because another clang-format formats some lines differently (scripts/deps.sh
# installs Debian 12's clang-format-14).
clang_format=${CLANG_FORMAT:-clang-format-14}
to_check=()
while IFS= read -r f; do to_check+=("$f"); done < <(git ls-files -- "${formatted[@]}" | grep -E '\.(cpp|h)$')
if [ "${1:-}" = "--format" ]; then
  shift
  for f in "$@"; do
    case "$f" in *.cpp|*.h) to_check+=("$f") ;; esac
  done
fi
if ! command -v "$clang_format" >/dev/null; then
  report "$clang_format is not installed (scripts/deps.sh installs it); the format of ${#to_check[@]} file(s) is unchecked"
else
  for f in "${to_check[@]}"; do
    "$clang_format" --dry-run --Werror "$f" 2>/dev/null ||
      report "$f: not formatted as .clang-format says; fix it with: $clang_format -i $f"
  done
fi

if [ "$problems" -gt 0 ]; then
  echo "lint: $problems problem(s)"
  exit 1
fi
echo "lint: ok"
