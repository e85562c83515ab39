// NVTX ranges as the CUDA emulator provides them (tests/cuda_emu/counters.cpp): the product marks
// the phases of a training step with nvtxRangePushA / nvtxRangePop (what Nsight Systems shows on a
// GPU), and the emulator attributes its counts (launches, copies, host waits) to the innermost range.
#pragma once

int nvtxRangePushA(const char* message);
int nvtxRangePop();
