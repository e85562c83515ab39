#include "nn/layers/max_pool2d.h"
#include "nn/layer_registry.h"
#include "nn/layers/conv2d.h"
#include "nn/repr.h"
#include "ops/ops.h"

namespace tr::nn {

MaxPool2d::MaxPool2d(Pair k, Pair s, Pair p, Pair d) : Module("MaxPool2d") {
  kernel_size = expand_pair(k, "MaxPool2d", "kernel_size", 1);
  stride = s.empty() ? kernel_size : expand_pair(s, "MaxPool2d", "stride", 1);
  padding = expand_pair(p, "MaxPool2d", "padding", 0);
  dilation = expand_pair(d, "MaxPool2d", "dilation", 1);
  for (int i = 0; i < 2; ++i)
    TR_CHECK(padding[i] <= (dilation[i] * (kernel_size[i] - 1) + 1) / 2,
             "MaxPool2d: pad should be at most half of effective kernel size, but got padding=", padding,
             ", kernel_size=", kernel_size, " and dilation=", dilation);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  TR_CHECK(x.dim() == 3 || x.dim() == 4, "MaxPool2d(", extra_repr(), "): expected input of shape [N, C, H, W] or ",
           "[C, H, W], got ", x.sizes());
  bool batched = x.dim() == 4;
  Tensor y = max_pool2d(batched ? x : x.unsqueeze(0), kernel_size, stride, padding, dilation);
  return batched ? y : y.squeeze(0);
}

std::string MaxPool2d::extra_repr() const {
  return str("kernel_size=", int_or_pair_repr(kernel_size), ", stride=", int_or_pair_repr(stride),
             ", padding=", int_or_pair_repr(padding), ", dilation=", int_or_pair_repr(dilation), ", ceil_mode=False");
}

static ModulePtr build_max_pool2d(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 3, "[C, H, W]");
  if (!t.has("kernel_size")) t.get_int("kernel_size");  // throws: missing required key
  Pair k = t.get_pair("kernel_size", {});
  Pair s = t.get_pair("stride", k), p = t.get_pair("padding", {0, 0}), d = t.get_pair("dilation", {1, 1});
  if (k[0] < 1 || k[1] < 1) t.fail("kernel_size", str("must be >= 1, got ", k));
  if (s[0] < 1 || s[1] < 1) t.fail("stride", str("must be >= 1, got ", s));
  if (d[0] < 1 || d[1] < 1) t.fail("dilation", str("must be >= 1, got ", d));
  for (int i = 0; i < 2; ++i)
    if (p[i] < 0 || p[i] > (d[i] * (k[i] - 1) + 1) / 2)
      t.fail("padding", str("= ", p, " must be >= 0 and at most half of the effective kernel size (kernel_size ", k,
                            ", dilation ", d, ")"));
  Shape os{io.shape[0], Conv2d::out_size(io.shape[1], k[0], s[0], p[0], d[0]),
           Conv2d::out_size(io.shape[2], k[1], s[1], p[1], d[1])};
  if (os[1] <= 0 || os[2] <= 0)
    layer_error(t, str("input shape ", io.str(), " gives an empty output ", os, " (kernel_size ", k, ", stride ", s,
                       ", padding ", p, ", dilation ", d, "): the input is smaller than the kernel"));
  io.shape = os;
  return std::make_shared<MaxPool2d>(k, s, p, d);
}
TR_REGISTER_LAYER("max_pool2d", "kernel_size, stride = kernel_size, padding = 0, dilation = 1; input [C, H, W]",
                  build_max_pool2d);

}  // namespace tr::nn
