// CrossEntropyLoss and its [loss] registration "cross_entropy" (the default loss of a run).
#include "nn/losses/cross_entropy_loss.h"
#include "ops/ops.h"

namespace tr::nn {

CrossEntropyLoss::CrossEntropyLoss(int64_t ii, double ls, std::string red)
    : Loss("CrossEntropyLoss", std::move(red)), ignore_index(ii), label_smoothing(ls) {
  TR_CHECK(ls >= 0.0 && ls <= 1.0, "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", ls);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, ignore_index, label_smoothing, reduction);
}

CrossEntropyOut CrossEntropyLoss::forward_scored(const Tensor& input, const Tensor& target) const {
  return cross_entropy_scored(input, target, ignore_index, label_smoothing, reduction);
}

std::string CrossEntropyLoss::extra_repr() const {
  std::string s;
  if (ignore_index != -100) s += str("ignore_index=", ignore_index);
  if (label_smoothing != 0.0) s += str(s.empty() ? "" : ", ", "label_smoothing=", label_smoothing);
  if (reduction != "mean") s += str(s.empty() ? "" : ", ", "reduction=", reduction);
  return s;
}

namespace {

LossPtr build(const TomlTable& t) {
  const int64_t ignore_index = t.get_int("ignore_index", -100);
  const double ls = t.get_float("label_smoothing", 0.0);
  if (!(ls >= 0.0 && ls <= 1.0)) t.fail("label_smoothing", str("must be in [0, 1], got ", ls));
  return std::make_shared<CrossEntropyLoss>(ignore_index, ls);
}

}  // namespace

TR_REGISTER_LOSS("cross_entropy", {build, "ignore_index = -100, label_smoothing = 0.0", /*classification=*/true});

}  // namespace tr::nn
