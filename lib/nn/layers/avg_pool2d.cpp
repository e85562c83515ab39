#include "nn/layers/avg_pool2d.h"
#include "nn/layer_registry.h"
#include "nn/layers/conv2d.h"
#include "nn/repr.h"
#include "nn/layers/max_pool2d.h"
#include "ops/ops.h"

namespace tr::nn {

AvgPool2d::AvgPool2d(Pair k, Pair s, Pair p, bool cip) : Module("AvgPool2d"), count_include_pad(cip) {
  kernel_size = expand_pair(k, "AvgPool2d", "kernel_size", 1);
  stride = s.empty() ? kernel_size : expand_pair(s, "AvgPool2d", "stride", 1);
  padding = expand_pair(p, "AvgPool2d", "padding", 0);
  for (int i = 0; i < 2; ++i)
    TR_CHECK(padding[i] <= kernel_size[i] / 2,
             "AvgPool2d: pad should be at most half of kernel size, but got padding=", padding,
             " and kernel_size=", kernel_size);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  TR_CHECK(x.dim() == 3 || x.dim() == 4, "AvgPool2d(", extra_repr(), "): expected input of shape [N, C, H, W] or ",
           "[C, H, W], got ", x.sizes());
  bool batched = x.dim() == 4;
  Tensor y = avg_pool2d(batched ? x : x.unsqueeze(0), kernel_size, stride, padding, count_include_pad);
  return batched ? y : y.squeeze(0);
}

std::string AvgPool2d::extra_repr() const {
  return str("kernel_size=", int_or_pair_repr(kernel_size), ", stride=", int_or_pair_repr(stride),
             ", padding=", int_or_pair_repr(padding));
}

static ModulePtr build_avg_pool2d(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 3, "[C, H, W]");
  if (!t.has("kernel_size")) t.get_int("kernel_size");  // throws: missing required key
  Pair k = t.get_pair("kernel_size", {});
  Pair s = t.get_pair("stride", k), p = t.get_pair("padding", {0, 0});
  bool cip = t.get_bool("count_include_pad", true);
  if (k[0] < 1 || k[1] < 1) t.fail("kernel_size", str("must be >= 1, got ", k));
  if (s[0] < 1 || s[1] < 1) t.fail("stride", str("must be >= 1, got ", s));
  for (int i = 0; i < 2; ++i)
    if (p[i] < 0 || p[i] > k[i] / 2)
      t.fail("padding", str("= ", p, " must be >= 0 and at most half of kernel_size ", k));
  Shape os{io.shape[0], Conv2d::out_size(io.shape[1], k[0], s[0], p[0], 1),
           Conv2d::out_size(io.shape[2], k[1], s[1], p[1], 1)};
  if (os[1] <= 0 || os[2] <= 0)
    layer_error(t, str("input shape ", io.str(), " gives an empty output ", os, " (kernel_size ", k, ", stride ", s,
                       ", padding ", p, "): the input is smaller than the kernel"));
  io.shape = os;
  return std::make_shared<AvgPool2d>(k, s, p, cip);
}
TR_REGISTER_LAYER("avg_pool2d",
                  "kernel_size, stride = kernel_size, padding = 0, count_include_pad = true; input [C, H, W]",
                  build_avg_pool2d);

}  // namespace tr::nn
