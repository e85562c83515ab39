#include "ops/cpu/onednn_conv.h"
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include "core/error.h"
#include "ops/cpu/env_choice.h"
#include "ops/cpu/onednn.h"
#include "ops/ops.h"

namespace tr::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN's own gemm-based and reference convolutions are slower than im2col + sgemm here
bool is_jit(const char* impl) {
  const std::string s = impl;
  return s.rfind("jit", 0) == 0 || s.rfind("brg", 0) == 0;
}

// A reorder between a user (plain) layout and a primitive's, built once.
struct Reorder {
  memory::desc from, to;
  std::optional<dnnl::reorder> prim;  // empty: the layouts are the same
  void init(const memory::desc& a, const memory::desc& b) {
    from = a;
    to = b;
    if (a != b) prim = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), a, onednn_engine(), b));
  }
};

// A backward primitive of a geometry, built on first use: two inputs reordered in and an output
// reordered out, under oneDNN's argument ids.
template <typename Prim> struct Backward {
  bool tried = false, ok = false;
  std::optional<typename Prim::primitive_desc> pd;
  std::optional<Prim> prim;
  Reorder in0, in1, out;
  int arg0 = 0, arg1 = 0, arg_out = 0;
  bool diff_bias = false;  // backward weights: also the bias gradient, in the same pass
};

struct Conv {
  memory::desc x, w, b, y;  // the user's: NCHW, OIHW, x, NCHW
  std::optional<dnnl::convolution_forward::primitive_desc> fwd_pd;
  std::optional<dnnl::convolution_forward> fwd;
  Reorder fwd_x, fwd_w, fwd_y;
  bool fwd_ok = false;
  Backward<dnnl::convolution_backward_data> data;                                // gx from (gy, w)
  Backward<dnnl::convolution_backward_weights> weights;                          // gw from (x, gy)
  Backward<dnnl::convolution_backward_weights> weights_bias{.diff_bias = true};  // and gb
  memory::dims strides, dilates, pad_l, pad_r;
};

// Builds the forward primitive of a geometry (and remembers whether it is a JIT one).
std::unique_ptr<Conv> make_conv(const ConvGeom& g, memory::data_type dt, bool bias) {
  auto c = std::make_unique<Conv>();
  const memory::dims xd{g.N, g.C, g.H, g.W}, wd{g.O, g.C, g.KH, g.KW}, yd{g.N, g.O, g.OH, g.OW};
  c->x = memory::desc(xd, dt, tag::nchw);
  c->w = memory::desc(wd, dt, tag::oihw);
  c->b = memory::desc({g.O}, dt, tag::x);
  c->y = memory::desc(yd, dt, tag::nchw);
  c->strides = {g.SH, g.SW};
  c->dilates = {g.DH - 1, g.DW - 1};
  c->pad_l = {g.PH, g.PW};
  // the right padding that makes oneDNN's output size ours
  c->pad_r = {(g.OH - 1) * g.SH + (g.KH - 1) * g.DH + 1 - g.H - g.PH,
              (g.OW - 1) * g.SW + (g.KW - 1) * g.DW + 1 - g.W - g.PW};
  if (g.G != 1 || c->pad_r[0] < 0 || c->pad_r[1] < 0) return c;
  const memory::desc xa(xd, dt, tag::any), wa(wd, dt, tag::any), ya(yd, dt, tag::any);
  try {
    auto d =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               xa, wa, c->b, ya, c->strides, c->dilates, c->pad_l, c->pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               xa, wa, ya, c->strides, c->dilates, c->pad_l, c->pad_r);
    c->fwd_pd.emplace(d, onednn_user_scratchpad(), onednn_engine());
    c->fwd_ok = is_jit(c->fwd_pd->impl_info_str());
    if (c->fwd_ok) {
      c->fwd.emplace(*c->fwd_pd);
      c->fwd_x.init(c->x, c->fwd_pd->src_desc());
      c->fwd_w.init(c->w, c->fwd_pd->weights_desc());
      c->fwd_y.init(c->fwd_pd->dst_desc(), c->y);
    }
  } catch (const dnnl::error&) { c->fwd_ok = false; }
  return c;
}

// The cached primitives of a geometry and dtype (a bias changes the forward primitive: two entries).
Conv& conv_for(const ConvGeom& g, DType t, bool bias, std::unique_lock<std::mutex>& lock) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::unique_ptr<Conv>> cache;
  lock = std::unique_lock<std::mutex>(mu);
  std::vector<int64_t> key{g.N,  g.C,  g.H,  g.W,  g.O,  g.KH, g.KW, g.OH, g.OW,
                           g.SH, g.SW, g.PH, g.PW, g.DH, g.DW, g.G,  bias, int64_t(t)};
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_conv(g, onednn_type(t, "oneDNN convolution"), bias)).first;
  return *it->second;
}

// A memory of layout `want` holding the user's data at p (reordered into a temporary when the
// layouts differ; `keep` owns it).
memory input(const Reorder& r, const void* p, Tensor& keep) {
  memory user(r.from, onednn_engine(), const_cast<void*>(p));
  if (!r.prim) return user;
  keep = empty({int64_t((r.to.get_size() + 3) / 4)});
  memory m(r.to, onednn_engine(), keep.raw_data());
  r.prim->execute(onednn_stream(), user, m);
  return m;
}
// A memory of the primitive's layout for an output that lands at p.
memory output(const Reorder& r, void* p, Tensor& keep) {
  if (!r.prim) return memory(r.to, onednn_engine(), p);
  keep = empty({int64_t((r.from.get_size() + 3) / 4)});
  return memory(r.from, onednn_engine(), keep.raw_data());
}
void finish_output(const Reorder& r, memory m, void* p) {
  if (!r.prim) return;
  memory user(r.to, onednn_engine(), p);
  r.prim->execute(onednn_stream(), m, user);
}

memory::desc any_layout(const memory::desc& d) { return memory::desc(d.dims(), d.data_type(), tag::any); }

void build(Conv& c, Backward<dnnl::convolution_backward_data>& b) {
  dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, any_layout(c.x), any_layout(c.w),
                                          any_layout(c.y), c.strides, c.dilates, c.pad_l, c.pad_r);
  b.pd.emplace(d, onednn_user_scratchpad(), onednn_engine(), *c.fwd_pd);
  b.ok = is_jit(b.pd->impl_info_str());
  if (!b.ok) return;
  b.prim.emplace(*b.pd);
  b.in0.init(c.y, b.pd->diff_dst_desc());
  b.in1.init(c.w, b.pd->weights_desc());
  b.out.init(b.pd->diff_src_desc(), c.x);
  b.arg0 = DNNL_ARG_DIFF_DST;
  b.arg1 = DNNL_ARG_WEIGHTS;
  b.arg_out = DNNL_ARG_DIFF_SRC;
}

void build(Conv& c, Backward<dnnl::convolution_backward_weights>& b) {
  using Desc = dnnl::convolution_backward_weights::desc;
  const auto alg = dnnl::algorithm::convolution_direct;
  const Desc d =
      b.diff_bias
          ? Desc(alg, any_layout(c.x), any_layout(c.w), c.b, any_layout(c.y), c.strides, c.dilates, c.pad_l, c.pad_r)
          : Desc(alg, any_layout(c.x), any_layout(c.w), any_layout(c.y), c.strides, c.dilates, c.pad_l, c.pad_r);
  b.pd.emplace(d, onednn_user_scratchpad(), onednn_engine(), *c.fwd_pd);
  // A layout that pads a stem's few input channels to the vector's width multiplies the kernel's
  // work (held to AVX2, fmnist_cnn's 1 channel as 8 of nChw8c: 3.1 ms against im2col's 1.2); with
  // AVX-512 oneDNN reads such an x as NCHW and stays ahead (0.75 against 1.1).
  b.ok = is_jit(b.pd->impl_info_str()) && b.pd->src_desc().get_size() <= c.x.get_size();
  if (!b.ok) return;
  b.prim.emplace(*b.pd);
  b.in0.init(c.x, b.pd->src_desc());
  b.in1.init(c.y, b.pd->diff_dst_desc());
  b.out.init(b.pd->diff_weights_desc(), c.w);
  b.arg0 = DNNL_ARG_SRC;
  b.arg1 = DNNL_ARG_DIFF_DST;
  b.arg_out = DNNL_ARG_DIFF_WEIGHTS;
}

// Runs the backward primitive `which` of g's geometry on (a, b) into out (and the bias gradient
// into out_bias, for a primitive with diff_bias); false where it has none.
template <typename Prim> bool run_backward(const ConvGeom& g, DType t, Backward<Prim> Conv::*which, const void* a,
                                           const void* b, void* out, void* out_bias = nullptr) {
  std::unique_lock<std::mutex> lock;
  Conv& c = conv_for(g, t, false, lock);
  if (!c.fwd_ok) return false;
  Backward<Prim>& op = c.*which;
  if (!op.tried) {
    op.tried = true;
    try {
      build(c, op);
    } catch (const dnnl::error&) { op.ok = false; }
  }
  lock.unlock();
  if (!op.ok) return false;
  Tensor k0, k1, ko, ks;
  memory m0 = input(op.in0, a, k0), m1 = input(op.in1, b, k1), mo = output(op.out, out, ko);
  std::unordered_map<int, memory> args{{op.arg0, m0},
                                       {op.arg1, m1},
                                       {op.arg_out, mo},
                                       {DNNL_ARG_SCRATCHPAD, onednn_scratchpad(op.pd->scratchpad_desc(), ks)}};
  if (op.diff_bias) args.emplace(DNNL_ARG_DIFF_BIAS, memory(c.b, onednn_engine(), out_bias));
  op.prim->execute(onednn_stream(), args);
  finish_output(op.out, mo, out);
  onednn_stream().wait();
  return true;
}

}  // namespace

bool onednn_conv_enabled() {
  static const bool on = env_choice("TR_CONV", {"onednn", "im2col"}, "onednn") == "onednn";
  return on;
}

bool onednn_conv2d_forward(const ConvGeom& g, DType t, const void* x, const void* w, const void* b, void* y) {
  // A stem's few input channels: reordering the output from nChw16c costs more than the JIT kernel
  // saves (fmnist_cnn's 1 -> 32 channel layer: 0.63 ms against im2col's 0.41). Its weight gradient
  // still gains with AVX-512 (0.31 against 0.40), not where its channels are padded (build above).
  if (g.C < 16) return false;
  std::unique_lock<std::mutex> lock;
  Conv& c = conv_for(g, t, b != nullptr, lock);
  lock.unlock();
  if (!c.fwd_ok) return false;
  Tensor kx, kw, ky, ks;
  memory xm = input(c.fwd_x, x, kx), wm = input(c.fwd_w, w, kw), ym = output(c.fwd_y, y, ky);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm},
                                       {DNNL_ARG_WEIGHTS, wm},
                                       {DNNL_ARG_DST, ym},
                                       {DNNL_ARG_SCRATCHPAD, onednn_scratchpad(c.fwd_pd->scratchpad_desc(), ks)}};
  if (b) args.emplace(DNNL_ARG_BIAS, memory(c.b, onednn_engine(), const_cast<void*>(b)));
  c.fwd->execute(onednn_stream(), args);
  finish_output(c.fwd_y, ym, y);
  onednn_stream().wait();
  return true;
}

bool onednn_conv2d_backward_input(const ConvGeom& g, DType t, const void* gy, const void* w, void* gx) {
  return run_backward(g, t, &Conv::data, gy, w, gx);
}

bool onednn_conv2d_backward_weight(const ConvGeom& g, DType t, const void* gy, const void* x, void* gw, void* gb) {
  if (gb) return run_backward(g, t, &Conv::weights_bias, x, gy, gw, gb);
  return run_backward(g, t, &Conv::weights, x, gy, gw);
}

}  // namespace tr::cpu
