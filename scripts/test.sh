#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (and checks the C++ layout,
# scripts/check_format.sh): the build of the product
# (CUDA compiled in when the toolkit is present; [gpu] tests skip without a GPU) with, in the same
# build, the CUDA emulation's binaries (build/cuda-emu/, tests/cuda_emu), in which the GPU path's
# tests run on the CPU; then the sanitizer build (clang): the unit tests under ASan, LeakSanitizer
# and UBSan, and each fuzz target for a few seconds (scripts/fuzz.sh runs them for longer).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/check_format.sh
build/trainer info
build/cuda-emu/trainer info
# [gpu] tests skip with a message when no CUDA device is present; say so here, once.
skipped=$(build/tests/unit_tests "[gpu]" 2>&1 | grep -c "no CUDA device" || true)
if [ "$skipped" -gt 0 ]; then
  echo "note: $skipped [gpu] test cases skipped ($(build/trainer info | sed -n 's/^cuda devices: //p'))"
fi
(cd build && ctest --output-on-failure -j "$(nproc)")

echo "== the unit tests under ASan, LeakSanitizer and UBSan; each fuzz target briefly (build-fuzz)"
bash scripts/build.sh --sanitize
bash scripts/sanitized_unit_tests.sh
FUZZ_NO_BUILD=1 bash scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-5}" --jobs "$(nproc)"
