// Errors that device kernels find (an index out of range, a class target out of bounds), raised
// when the host next waits for the device rather than at the launch, so that checking them never
// stalls the host: torch's device-side asserts, with the CPU's message. On the CPU the check runs
// at once. The message says that the error belongs to an earlier op.
#pragma once
#include <cstdint>
#include <functional>
#include "core/tensor.h"

namespace tr {

// A one-element I64 word on `d` with all bits set (-1, i.e. ULLONG_MAX to an atomicMin): where a
// kernel records the smallest position of an invalid input; -1 is "none found".
Tensor error_word(Device d);
// `word`: a one-element I64 tensor that the op's kernels leave at `ok` when they found nothing.
// `raise(value)` throws the op's error from the value found (it may read the tensors it captured).
void check_on_sync(const Tensor& word, int64_t ok, std::function<void(int64_t)> raise);
// Reads every pending word (one copy) and raises the first failed check; the others are dropped
// with it. Runs after each device-to-host copy and synchronize (core's after-sync hook).
void run_pending_checks();

}  // namespace tr
