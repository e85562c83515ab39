#include "nn/layers/adaptive_avg_pool2d.h"
#include "nn/layer_registry.h"
#include "nn/repr.h"
#include "nn/layers/max_pool2d.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {
// Bins along dim `d` of x: y_i = mean(x[start_i : end_i]) along d, stacked back at d.
Tensor adaptive_mean_along(const Tensor& x, int64_t d, int64_t out) {
  int64_t in = x.size(d);
  if (in == out) return x;
  std::vector<Tensor> bins;
  bins.reserve(size_t(out));
  for (int64_t i = 0; i < out; ++i) {
    int64_t start = (i * in) / out, end = ((i + 1) * in + out - 1) / out;
    bins.push_back(mean(slice(x, d, start, end), {d}));
  }
  return stack(bins, d);
}
}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, const Pair& output_size) {
  TR_CHECK(x.dim() >= 2, "adaptive_avg_pool2d: expected an input with at least 2 dims [.., H, W], got ", x.sizes());
  Pair os = expand_pair(output_size, "adaptive_avg_pool2d", "output_size", 1);
  int64_t H = x.size(-2), W = x.size(-1);
  TR_CHECK(H > 0 && W > 0, "adaptive_avg_pool2d: expected non-empty spatial dims, got input of shape ", x.sizes());
  if (os[0] == 1 && os[1] == 1) return mean(x, {-2, -1}, true);
  if (x.dim() == 4 && H % os[0] == 0 && W % os[1] == 0) {
    // bins tile the input: start = i H/OH, end = (i+1) H/OH, i.e. a kernel = stride = H/OH window
    Pair k{H / os[0], W / os[1]};
    return avg_pool2d(x, k, k);
  }
  // mean over a rectangle = mean over its columns of the mean over its rows
  int64_t n = x.dim();
  return adaptive_mean_along(adaptive_mean_along(x, n - 2, os[0]), n - 1, os[1]);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Pair os) : Module("AdaptiveAvgPool2d") {
  output_size = expand_pair(os, "AdaptiveAvgPool2d", "output_size", 1);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  TR_CHECK(x.dim() == 3 || x.dim() == 4, "AdaptiveAvgPool2d(", extra_repr(), "): expected input of shape ",
           "[N, C, H, W] or [C, H, W], got ", x.sizes());
  TR_CHECK(x.is_floating_point(), "AdaptiveAvgPool2d: expected a floating point input, got ", dtype_name(x.dtype()));
  return adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + int_or_pair_repr(output_size); }

static ModulePtr build_adaptive_avg_pool2d(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 3, "[C, H, W]");
  if (!t.has("output_size")) t.get_int("output_size");  // throws: missing required key
  Pair os = t.get_pair("output_size", {});
  if (os[0] < 1 || os[1] < 1) t.fail("output_size", str("must be >= 1, got ", os));
  if (io.shape[1] < 1 || io.shape[2] < 1)
    layer_error(t, str("expects a non-empty input [C, H, W], but the previous layer gives ", io.str()));
  io.shape = {io.shape[0], os[0], os[1]};
  return std::make_shared<AdaptiveAvgPool2d>(os);
}
TR_REGISTER_LAYER("adaptive_avg_pool2d", "output_size (int or [h, w]); input [C, H, W]", build_adaptive_avg_pool2d);

}  // namespace tr::nn
