#!/usr/bin/env bash
# Functions longer than N lines (default 60), longest first: "lines  file:line  name".
#   scripts/long_functions.sh [N] [dir...]     (dirs default to lib app)
# Lines are counted from the definition's first line to its closing brace (universal-ctags' end
# field); lambdas are counted inside the function that holds them.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-60}
shift || true
dirs=("${@:-lib app}")
# shellcheck disable=SC2068
ctags-universal -R --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne -f - ${dirs[@]} |
  awk -F'\t' -v limit="$limit" '
    $1 !~ /^__anon/ {
      line = ""; end = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        if ($i ~ /^end:/) end = substr($i, 5)
      }
      if (line != "" && end != "" && end - line + 1 > limit)
        printf "%5d  %s:%s  %s\n", end - line + 1, $2, line, $1
    }' | sort -rn
