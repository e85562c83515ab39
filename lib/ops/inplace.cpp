// In-place ops (copy_, fill_, add_, mul_, ...): version counters and autograd rebasing.
#include "core/grad_mode.h"
#include "core/cuda_hooks.h"
#include "ops/ops.h"
#include "ops/op_profiler.h"
#include "ops/registry.h"

namespace tr {

namespace {

void check_inplace_autograd(const Tensor& self, const char* op) {
  TR_CHECK(!(self.is_leaf() && self.requires_grad()), op, ": a leaf Variable that requires grad (shape ", self.sizes(),
           ") is being used in an in-place operation; wrap it in NoGradGuard or use an out-of-place op");
  TR_CHECK(!self.impl()->is_view, op, ": in-place modification of a view (shape ", self.sizes(),
           ") under autograd is not supported; clone() the view first or use an out-of-place op");
}

// Makes `result`'s history the history of `self` after its data was overwritten.
void rebase_history(Tensor& self, const Tensor& result) {
  AutogradMeta& m = self.mutable_autograd_meta();
  m.requires_grad = true;
  m.grad_fn = result.grad_fn();
  m.output_nr = result.output_nr();
}
}  // namespace

TR_REGISTER_OP(copy_) {
  d.num_inputs = 2;
  d.infer = no_outputs;
  d.differentiable = false;  // autograd of copy_ is handled by Tensor::copy_
}
TR_REGISTER_OP(fill_) {
  d.num_inputs = 1;
  d.infer = no_outputs;
  d.differentiable = false;
}

Tensor& Tensor::copy_(const Tensor& src) {
  TR_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  broadcast_shapes(sizes(), src.sizes(), "copy_");
  Shape bs = broadcast_shapes(sizes(), src.sizes(), "copy_");
  TR_CHECK(bs == sizes(), "copy_: source of shape ", src.sizes(), " cannot be broadcast to destination shape ",
           sizes());
  bool track = GradMode::is_enabled() && (src.requires_grad() || requires_grad());
  if (track) check_inplace_autograd(*this, "copy_");
  Tensor s = src;
  if (s.device() != device()) s = s.to(device());
  {
    NoGradGuard ng;
    dispatch("copy_", {*this, s.detach()});
  }
  impl()->storage->bump_version();
  if (track) {
    // d(copy_)/d(src) = g summed to src's shape; the old value of self gets no gradient.
    Tensor r = src.requires_grad() ? tr::view(tr::expand(cast(src, dtype()), sizes()), sizes()) : Tensor();
    if (r.defined())
      rebase_history(*this, r);
    else
      detach_();
  }
  return *this;
}

Tensor& Tensor::fill_(double v) {
  if (GradMode::is_enabled() && requires_grad()) check_inplace_autograd(*this, "fill_");
  dispatch("fill_", {*this}, {{"value", v}});
  impl()->storage->bump_version();
  if (GradMode::is_enabled() && requires_grad()) detach_(), requires_grad_(false);
  return *this;
}

Tensor& dispatch_inplace(const char* name, Tensor& self, std::vector<Tensor> others, const Attrs& attrs) {
  const OpDef& op = OpRegistry::get().at(name);
  bool track = false;
  if (GradMode::is_enabled()) {
    track = self.requires_grad();
    for (auto& o : others) track = track || o.requires_grad();
  }
  std::vector<Tensor> inputs{self};
  inputs.insert(inputs.end(), others.begin(), others.end());
  if (!track) {
    DType rt = op.promote == Promote::None ? self.dtype() : result_type(inputs);
    Shape bs = self.sizes();
    for (auto& o : others) bs = broadcast_shapes(bs, o.sizes(), name);
    TR_CHECK(bs == self.sizes(), name, "_: output with shape ", self.sizes(), " doesn't match the broadcast shape ",
             bs);
    KernelFn k = op.kernels[int(self.device().type)];
    if (op.pointwise && rt == self.dtype() && k) {
      for (auto& o : others) {
        if (o.dtype() != rt) o = o.is_wrapped_number() ? wrap_scalar(o.item(), rt) : cast(o, rt);
        TR_CHECK(o.device() == self.device() || (o.dim() == 0 && o.device().is_cpu()), name,
                 "_: expected all tensors on ", self.device().str(), ", got one on ", o.device().str());
      }
      std::vector<Tensor> ins{self};
      ins.insert(ins.end(), others.begin(), others.end());
      std::vector<Tensor> outs{self};
      {
        OpTimer timer(name, self.dtype(), self.device(), &ins);  // profiled as "add" etc., as the op it runs
        k(ins, outs, attrs);
      }
      self.impl()->storage->bump_version();
      return self;
    }
    Tensor r = dispatch1(name, inputs, attrs);
    NoGradGuard ng;
    return self.copy_(r);
  }
  check_inplace_autograd(self, name);
  // Out of place on a clone when the op saves its inputs (the clone keeps the old value alive
  // for backward), then copy the result in and take over its history.
  if (op.save_inputs && self.requires_grad()) inputs[0] = clone(self);
  Tensor r = dispatch1(name, inputs, attrs);
  {
    NoGradGuard ng;
    dispatch("copy_", {self, r.detach()});
  }
  self.impl()->storage->bump_version();
  rebase_history(self, r);
  return self;
}

Tensor& Tensor::add_(const Tensor& o, double alpha) { return dispatch_inplace("add", *this, {o}, {{"alpha", alpha}}); }
Tensor& Tensor::add_(double v) {
  return dispatch_inplace("add", *this, {wrap_scalar(v, DType::F64)}, {{"alpha", 1.0}});
}
Tensor& Tensor::sub_(const Tensor& o) { return dispatch_inplace("sub", *this, {o}, {{"alpha", 1.0}}); }
Tensor& Tensor::mul_(const Tensor& o) { return dispatch_inplace("mul", *this, {o}); }
Tensor& Tensor::mul_(double v) { return dispatch_inplace("mul", *this, {wrap_scalar(v, DType::F64)}); }
Tensor& Tensor::div_(const Tensor& o) { return dispatch_inplace("div", *this, {o}); }
Tensor& Tensor::div_(double v) { return dispatch_inplace("div", *this, {wrap_scalar(v, DType::F64)}); }

}  // namespace tr
