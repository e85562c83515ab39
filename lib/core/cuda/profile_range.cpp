// cuda::range_push / range_pop (core/cuda_hooks.h) as NVTX ranges. NVTX 3 is header-only: without a
// profiler attached each call is a check of a function pointer.
#include <nvtx3/nvToolsExt.h>
#include "core/cuda_hooks.h"

namespace tr::cuda {

void range_push(const char* name) { nvtxRangePushA(name); }
void range_pop() { nvtxRangePop(); }

}  // namespace tr::cuda
