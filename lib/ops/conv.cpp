// 2-D convolution (NCHW): ops conv2d (with an optional bias, added inside the kernel), and
// conv2d_backward_input and conv2d_backward_weight. Each op's backward is written with the other
// two (and a sum for the bias), so gradients of any order are again these ops.
// Attrs: stride, padding, dilation ({h, w}), groups; the backward ops add input_size / weight_size.
#include <tuple>
#include <utility>
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

struct ConvParams {
  Pair stride, padding, dilation;
  int64_t groups = 1;
};

ConvParams params_of(const Attrs& a) {
  return {a.ints("stride"), a.ints("padding"), a.ints("dilation"), a.i("groups")};
}
Attrs attrs_of(const ConvParams& p) {
  return {{"stride", p.stride}, {"padding", p.padding}, {"dilation", p.dilation}, {"groups", p.groups}};
}

// Output shape [N, O, OH, OW] of x [N, C, H, W] convolved with w [O, C/groups, KH, KW];
// OH = (H + 2 PH - DH (KH - 1) - 1) / SH + 1 (floor). Checks every argument against the others.
Shape conv_out_shape(const char* op, const Shape& x, const Shape& w, const ConvParams& p) {
  TR_CHECK(x.size() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x);
  TR_CHECK(w.size() == 4, op, ": expected a 4-D weight [C_out, C_in / groups, kH, kW], got shape ", w);
  TR_CHECK(p.stride.size() == 2 && p.padding.size() == 2 && p.dilation.size() == 2, op,
           ": stride, padding and dilation must have 2 values, got ", p.stride, ", ", p.padding, ", ", p.dilation);
  for (int d = 0; d < 2; ++d)
    TR_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0, op, ": expected stride >= 1, dilation >= 1",
             " and padding >= 0, got stride ", p.stride, ", dilation ", p.dilation, ", padding ", p.padding);
  int64_t g = p.groups;
  TR_CHECK(g >= 1, op, ": groups must be >= 1, got ", g);
  TR_CHECK(x[1] % g == 0, op, ": groups=", g, " does not divide the ", x[1], " input channels of input shape ", x);
  TR_CHECK(w[0] % g == 0, op, ": groups=", g, " does not divide the ", w[0], " output channels of weight shape ", w);
  TR_CHECK(w[1] * g == x[1], op, ": given groups=", g, ", weight of shape ", w, " expects input with ", w[1] * g,
           " channels, but got input of shape ", x, " with ", x[1], " channels");
  Shape out{x[0], w[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t padded = x[2 + d] + 2 * p.padding[d];
    int64_t eff = p.dilation[d] * (w[2 + d] - 1) + 1;
    TR_CHECK(w[2 + d] >= 1 && padded >= eff, op, ": output size would be <= 0: input of shape ", x, " padded to (",
             x[2] + 2 * p.padding[0], " x ", x[3] + 2 * p.padding[1], ") is smaller than the dilated kernel (",
             p.dilation[0] * (w[2] - 1) + 1, " x ", p.dilation[1] * (w[3] - 1) + 1, ") of weight shape ", w);
    out[2 + d] = (padded - eff) / p.stride[d] + 1;
  }
  return out;
}

void check_float_pair(const char* op, const char* an, const Tensor& a, const char* bn, const Tensor& b) {
  TR_CHECK(is_floating(a.dtype()), op, ": expected a floating point ", an, ", got ", dtype_name(a.dtype()));
  TR_CHECK(a.dtype() == b.dtype(), op, ": ", an, " (", dtype_name(a.dtype()), ", shape ", a.sizes(), ") and ", bn, " (",
           dtype_name(b.dtype()), ", shape ", b.sizes(), ") must have the same dtype");
}

Tensor conv_fwd(const Tensor& x, const Tensor& w, const ConvParams& p, const Tensor& b = Tensor()) {
  return dispatch1("conv2d", b.defined() ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w}, attrs_of(p));
}
Tensor conv_bin(const Tensor& gy, const Tensor& w, const Shape& input_size, const ConvParams& p) {
  Attrs a = attrs_of(p);
  a.set("input_size", input_size);
  return dispatch1("conv2d_backward_input", {gy, w}, a);
}
Tensor conv_bw(const Tensor& gy, const Tensor& x, const Shape& weight_size, const ConvParams& p) {
  Attrs a = attrs_of(p);
  a.set("weight_size", weight_size);
  return dispatch1("conv2d_backward_weight", {gy, x}, a);
}
// (gw, gb) in one call: gb = gy summed over N, OH, OW, the way the device's convolution computes it
// (on the CPU, in oneDNN's pass over gy for gw: torch's bits. Below a batch norm the bias gradient
// is rounding noise, and AdamW turns any difference in it into a step of +-lr.)
std::pair<Tensor, Tensor> conv_bw_bias(const Tensor& gy, const Tensor& x, const Shape& weight_size,
                                       const ConvParams& p) {
  Attrs a = attrs_of(p);
  a.set("weight_size", weight_size);
  a.set("bias", int64_t(1));
  auto r = dispatch("conv2d_backward_weight", {gy, x}, a);
  return {r[0], r[1]};
}

// 2 x multiply-adds of a convolution with output (or output gradient) y and weight shape w:
// each output element sums C/groups x kH x kW products.
double conv_flops(const Tensor& y, const Shape& w) { return 2.0 * double(y.numel()) * double(w[1] * w[2] * w[3]); }

}  // namespace

// y = conv(x, w) (+ b[o] on output channel o when a bias is given: inputs x, w[, b]);
// dx = Bin(gy, w), dw = Bw(gy, x), db = sum of gy over N, OH, OW
TR_REGISTER_OP(conv2d) {
  d.autocast = amp::CastPolicy::LowerPrecision;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
    return conv_flops(out[0], in[1].sizes());
  };
  d.num_inputs = -1;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    TR_CHECK(in.size() == 2 || in.size() == 3, "conv2d: expected inputs (input, weight[, bias]), got ", in.size(),
             " tensors");
    check_float_pair("conv2d", "input", in[0], "weight", in[1]);
    if (in.size() == 3) {
      TR_CHECK(in[2].dim() == 1 && in[2].size(0) == in[1].size(0), "conv2d: bias of shape ", in[2].sizes(),
               " does not match weight of shape ", in[1].sizes(), " (expected [", in[1].size(0), "])");
      check_float_pair("conv2d", "input", in[0], "bias", in[2]);
    }
    return {{conv_out_shape("conv2d", in[0].sizes(), in[1].sizes(), params_of(a)), in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    ConvParams p = params_of(c.attrs);
    const Tensor &x = c.inputs[0], &w = c.inputs[1], &g = c.grads[0];
    Tensor gx, gw, gb;
    const bool need_gb = c.needs_input_grad.size() == 3 && c.needs_input_grad[2];
    if (c.needs_input_grad[0]) gx = conv_bin(g, w, c.input_specs[0].sizes, p);
    if (c.needs_input_grad[1] && need_gb)
      std::tie(gw, gb) = conv_bw_bias(g, x, c.input_specs[1].sizes, p);
    else if (c.needs_input_grad[1])
      gw = conv_bw(g, x, c.input_specs[1].sizes, p);
    else if (need_gb)
      gb = sum(g, {0, 2, 3});
    return {gx, gw, gb};
  };
}

// gx = Bin(gy, w), the adjoint of x -> conv(x, w): <g, Bin(gy, w)> = <gy, conv(g, w)>, so
// d/dgy = conv(g, w) and d/dw = Bw(gy, g).
TR_REGISTER_OP(conv2d_backward_input) {
  d.num_inputs = 2;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
    return conv_flops(in[0], in[1].sizes());
  };
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "conv2d_backward_input";
    check_float_pair(op, "grad_output", in[0], "weight", in[1]);
    const Shape& xs = a.ints("input_size");
    Shape ys = conv_out_shape(op, xs, in[1].sizes(), params_of(a));
    TR_CHECK(in[0].sizes() == ys, op, ": grad_output of shape ", in[0].sizes(), " does not match the output shape ", ys,
             " of a convolution of input size ", xs, " with weight of shape ", in[1].sizes());
    return {{xs, in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    ConvParams p = params_of(c.attrs);
    const Tensor &gy = c.inputs[0], &w = c.inputs[1], &g = c.grads[0];
    Tensor ggy, gw;
    if (c.needs_input_grad[0]) ggy = conv_fwd(g, w, p);
    if (c.needs_input_grad[1]) gw = conv_bw(gy, g, c.input_specs[1].sizes, p);
    return {ggy, gw};
  };
}

// gw = Bw(gy, x), the adjoint of w -> conv(x, w): <g, Bw(gy, x)> = <gy, conv(x, g)>, so
// d/dgy = conv(x, g) and d/dx = Bin(gy, g). With attr bias = 1 a second output gb = sum of gy over
// N, OH, OW (torch's convolution_backward with the bias in its output mask): d/dgy += g_b[o].
TR_REGISTER_OP(conv2d_backward_weight) {
  d.unmaterialized_grads = 0b10;
  d.num_inputs = 2;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
    return conv_flops(in[0], out[0].sizes());
  };
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "conv2d_backward_weight";
    check_float_pair(op, "grad_output", in[0], "input", in[1]);
    const Shape& ws = a.ints("weight_size");
    Shape ys = conv_out_shape(op, in[1].sizes(), ws, params_of(a));
    TR_CHECK(in[0].sizes() == ys, op, ": grad_output of shape ", in[0].sizes(), " does not match the output shape ", ys,
             " of a convolution of input of shape ", in[1].sizes(), " with weight size ", ws);
    if (a.has("bias") && a.i("bias") != 0) return {{ws, in[0].dtype()}, {{ws[0]}, in[0].dtype()}};
    return {{ws, in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    ConvParams p = params_of(c.attrs);
    const Tensor &gy = c.inputs[0], &x = c.inputs[1], &g = c.grads[0];
    Tensor ggy, gx;
    if (c.needs_input_grad[0]) ggy = conv_fwd(x, g, p);
    if (c.needs_input_grad[0] && c.grads.size() == 2 && c.grads[1].defined())
      ggy = ggy + c.grads[1].reshape({1, gy.size(1), 1, 1});
    if (c.needs_input_grad[1]) gx = conv_bin(gy, g, c.input_specs[1].sizes, p);
    return {ggy, gx};
  };
}

// torch.nn.functional.conv2d: y[n, o] = sum_c x[n, c] (*) w[o, c] + b[o], within each group.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  const char* op = "conv2d";
  ConvParams p{expand_pair(stride, op, "stride", 1), expand_pair(padding, op, "padding", 0),
               expand_pair(dilation, op, "dilation", 1), groups};
  TR_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.sizes());
  TR_CHECK(w.dim() == 4, op, ": expected a 4-D weight [C_out, C_in / groups, kH, kW], got shape ", w.sizes());
  check_float_pair(op, "input", x, "weight", w);
  return conv_fwd(x, w, p, b);
}

}  // namespace tr
