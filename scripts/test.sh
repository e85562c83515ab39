#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/trainer info
# GPU tests skip (with a message) when no CUDA device is present; show those messages here.
build/tests/unit_tests "[gpu]" 2>&1 | grep -iE "no CUDA device|skip" | sort -u | head -3 || true
cd build
ctest --output-on-failure -j "$(nproc)"
