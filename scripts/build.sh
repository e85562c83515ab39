#!/usr/bin/env bash
# Configures and builds everything into build/ (Release). Extra args go to cmake.
#   The build holds the CUDA emulation's binaries too: the CUDA backend against the CUDA emulator
#   (tests/cuda_emu), linked with the product's other objects into build/cuda-emu/ (trainer,
#   unit_tests, integration_tests), for running the GPU path's tests on a machine without a GPU.
#   Never the product. scripts/build.sh --cuda-emulation [cmake args] builds only those.
#   scripts/build.sh --sanitize [cmake args]: clang, everything under ASan+LSan+UBSan with
#   libFuzzer coverage, into build-fuzz/: the unit tests and the fuzz targets (tests/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --sanitize ]]; then
  shift
  bash scripts/deps.sh --sanitize
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" -DTRAINER_FUZZ=ON "$@" >/dev/null
  ninja -C build-fuzz unit_tests fuzz_targets
  exit 0
fi
bash scripts/deps.sh
emulation_only=0
if [[ ${1:-} == --cuda-emulation ]]; then
  shift
  emulation_only=1
fi
# The CUDA backend is compiled whenever the toolkit is present, even without a GPU.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if [[ $emulation_only == 1 ]]; then
  ninja -C build trainer_emu unit_tests_emu integration_tests_emu
else
  ninja -C build
fi
