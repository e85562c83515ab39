#include "nn/layers/conv2d.h"
#include <cmath>
#include "nn/layer_registry.h"
#include "nn/repr.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::nn {

int64_t Conv2d::out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;  // may be negative: floor division, not truncation
  return span < 0 ? 0 : span / s + 1;
}

Conv2d::Conv2d(int64_t in, int64_t out, Pair k, Pair s, Pair p, Pair d, int64_t g, bool has_bias)
    : Module("Conv2d"), in_channels(in), out_channels(out), groups(g) {
  TR_CHECK(in > 0 && out > 0, "Conv2d: in_channels and out_channels must be positive, got ", in, " and ", out);
  TR_CHECK(g >= 1, "Conv2d: groups must be positive, got ", g);
  TR_CHECK(in % g == 0, "Conv2d: in_channels (", in, ") must be divisible by groups (", g, ")");
  TR_CHECK(out % g == 0, "Conv2d: out_channels (", out, ") must be divisible by groups (", g, ")");
  kernel_size = expand_pair(k, "Conv2d", "kernel_size", 1);
  stride = expand_pair(s, "Conv2d", "stride", 1);
  padding = expand_pair(p, "Conv2d", "padding", 0);
  dilation = expand_pair(d, "Conv2d", "dilation", 1);
  weight = empty({out, in / g, kernel_size[0], kernel_size[1]});
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (has_bias) {
    bias = empty({out});
    double bound = 1.0 / std::sqrt(double(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  TR_CHECK((x.dim() == 3 || x.dim() == 4) && x.size(-3) == in_channels, "Conv2d(", extra_repr(),
           "): expected input of shape [N, ", in_channels, ", H, W] or [", in_channels, ", H, W], got ", x.sizes());
  bool batched = x.dim() == 4;
  Tensor y = conv2d(batched ? x : x.unsqueeze(0), weight, bias, stride, padding, dilation, groups);
  return batched ? y : y.squeeze(0);
}

std::string Conv2d::extra_repr() const {
  std::string s =
      str(in_channels, ", ", out_channels, ", kernel_size=", pair_repr(kernel_size), ", stride=", pair_repr(stride));
  if (padding != Pair{0, 0}) s += ", padding=" + pair_repr(padding);
  if (dilation != Pair{1, 1}) s += ", dilation=" + pair_repr(dilation);
  if (groups != 1) s += str(", groups=", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

namespace {
// A required int-or-pair key; a missing key gets the standard "missing required key" error.
Pair required_pair(const TomlTable& t, const std::string& key) {
  if (!t.has(key)) t.get_int(key);  // throws: missing required key
  return t.get_pair(key, {});
}
}  // namespace

static ModulePtr build_conv2d(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 3, "[C, H, W]");
  int64_t in = io.shape[0];
  if (t.has("in_channels") && t.get_int("in_channels") != in)
    layer_error(t, str("in_channels = ", t.get_int("in_channels"), " does not match the input shape ", io.str(),
                       " coming from the previous layer"));
  int64_t out = t.get_int("out_channels");
  Pair k = required_pair(t, "kernel_size");
  Pair s = t.get_pair("stride", {1, 1}), p = t.get_pair("padding", {0, 0}), d = t.get_pair("dilation", {1, 1});
  int64_t g = t.get_int("groups", 1);
  bool b = t.get_bool("bias", true);
  if (out <= 0) t.fail("out_channels", str("must be positive, got ", out));
  if (k[0] < 1 || k[1] < 1) t.fail("kernel_size", str("must be >= 1, got ", k));
  if (s[0] < 1 || s[1] < 1) t.fail("stride", str("must be >= 1, got ", s));
  if (p[0] < 0 || p[1] < 0) t.fail("padding", str("must be >= 0, got ", p));
  if (d[0] < 1 || d[1] < 1) t.fail("dilation", str("must be >= 1, got ", d));
  if (g < 1 || in % g != 0 || out % g != 0)
    t.fail("groups", str("= ", g, " must divide both in_channels (", in, ", from the input shape ", io.str(),
                         ") and out_channels (", out, ")"));
  Shape os{out, Conv2d::out_size(io.shape[1], k[0], s[0], p[0], d[0]),
           Conv2d::out_size(io.shape[2], k[1], s[1], p[1], d[1])};
  if (os[1] <= 0 || os[2] <= 0)
    layer_error(t, str("input shape ", io.str(), " gives an empty output ", os, " (kernel_size ", k, ", stride ", s,
                       ", padding ", p, ", dilation ", d, "): the input is smaller than the kernel"));
  auto m = std::make_shared<Conv2d>(in, out, k, s, p, d, g, b);
  io.shape = os;
  return m;
}
TR_REGISTER_LAYER("conv2d",
                  "out_channels, kernel_size, stride = 1, padding = 0, dilation = 1, groups = 1, bias = true, "
                  "in_channels (optional check); input [C, H, W]",
                  build_conv2d);

}  // namespace tr::nn
