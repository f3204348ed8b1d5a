#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks what review should not have to: every file but JSON, Markdown and fuzz inputs starts
# with an SPDX licence line (meson.build files included), dataplane/ never includes control/, and
# workers bump their counters with count().
#   scripts/lint.sh                   the checks above, on every file git knows
#   scripts/lint.sh --format FILE...  also clang-format (.clang-format) on FILE..., as a dry run
# The tree as a whole is not clang-formatted yet; format the files you change.
# Exit status 1 when something is wrong, with one line per problem.
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

# 4. Formatting, of the files named.
if [ "${1:-}" = "--format" ]; then
  shift
  command -v clang-format >/dev/null || { report "clang-format is not installed (Debian clang-format)"; shift $#; }
  for f in "$@"; do
    case "$f" in
      *.cpp|*.h) clang-format --dry-run --Werror "$f" 2>/dev/null || report "$f: not formatted as .clang-format says (clang-format -i $f)" ;;
    esac
  done
fi

if [ "$problems" -gt 0 ]; then
  echo "lint: $problems problem(s)"
  exit 1
fi
echo "lint: ok"
