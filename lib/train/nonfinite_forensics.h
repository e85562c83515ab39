// [train] nonfinite: finding an inf or a NaN in a step before it is applied, and, with "stop",
// finding where it came from: the step re-run with every op checked and the layer being run
// recorded, the batch's sample indices saved, and one error that says all of it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "core/rng.h"
#include "data/dataloader.h"
#include "train/run_setup.h"

namespace tr::train {

// What is non-finite after a step's backward ("" when nothing is): this process's loss (single
// process: with ranks, each has only its part) and the gradients.
std::string nonfinite_in_step(Run& run, const Tensor& loss_part);

// The step being diagnosed: optimizer step `step` over `micro`, which `what` (nonfinite_in_step's)
// found non-finite.
struct NonfiniteStep {
  int64_t step = 0;
  const std::vector<data::Batch>& micro;
  std::string what;
  GeneratorState rng_at_start;  // the random state the step began with (dropout)
};
// Runs the step's forward and backward again, gradients kept local (the ranks do not join);
// *in_backward says, while it runs, whether the backward is under way.
using StepRerun = std::function<void(bool* in_backward)>;

// nonfinite = "stop": saves the batch's indices, re-runs the step from its starting random state
// with NonFiniteOpCheck on and hooks naming the layer, and throws the report.
[[noreturn]] void stop_nonfinite(Run& run, const NonfiniteStep& s, const StepRerun& rerun);

}  // namespace tr::train
