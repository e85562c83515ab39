// The model scored on the eval set: what eval lines log, keep_best compares and fit() returns.
#pragma once
#include <cstdint>
#include <optional>

namespace tr::train {

struct EvalResult {
  double loss = 0;
  std::optional<double> accuracy;  // for a classification loss
  int64_t count = 0;               // predictions scored (samples, or tokens for a language model)
};

}  // namespace tr::train
