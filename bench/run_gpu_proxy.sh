#!/usr/bin/env bash
# The proxies of GPU speed that need no GPU: per training step of GPT-2's graph and recipe at
# emulator size (bench/gpt2_proxy.toml), the kernel launches, copies, host waits and polls per
# phase and per transformer block, and the peak of device memory, as the CUDA emulator counts them
# (tests/cuda_emu/counters.cpp). The same measurement is the test that holds them
# (tests/integration/test_cuda_proxy.cpp); this prints its table. Builds build/cuda-emu/ if needed.
# Usage: bench/run_gpu_proxy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/cuda-emu/integration_tests ]] || bash scripts/build.sh --cuda-emulation
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores (the counts do not depend on it)"
build/cuda-emu/integration_tests "[proxy]" | grep -E '^\||^peak' || {
  build/cuda-emu/integration_tests "[proxy]"
  exit 1
}
