#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/trainer info
# [gpu] tests skip with a message when no CUDA device is present; say so here, once.
skipped=$(build/tests/unit_tests "[gpu]" 2>&1 | grep -c "no CUDA device" || true)
if [ "$skipped" -gt 0 ]; then
  echo "note: $skipped [gpu] test cases skipped ($(build/trainer info | sed -n 's/^cuda devices: //p'))"
fi
cd build
ctest --output-on-failure -j "$(nproc)"
