#!/usr/bin/env bash
# Checks that every tracked C++ file is laid out as .clang-format says; --fix rewrites them.
#   scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || { echo "check_format: clang-format is not installed (apt-get install clang-format)"; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# one run over every file: each place that differs is a "file:line:col: error: code should be
# clang-formatted" line
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<< "$out" | sort -u)
  [ ${#bad[@]} -gt 0 ] || { echo "check_format: clang-format failed:"; echo "$out" | head -20; exit 1; }
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format (scripts/check_format.sh --fix rewrites them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files as .clang-format says"
