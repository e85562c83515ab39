// The losses of torch.nn.functional: cross_entropy (class indices or probabilities, ignore_index,
// label smoothing), mse_loss and binary_cross_entropy_with_logits, as compositions of ops. They
// run in f32 under autocast (torch's fp32 list). The loss modules (nn/losses/) call these.
// cross_entropy with class indices runs the fused op cross_entropy_rows (ops/cross_entropy.cpp)
// where it can; the composition below it stays its spec ([run] fused_ops = false).
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/deferred_check.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

enum class Reduction { None, Mean, Sum };

Reduction parse_reduction(const std::string& r, const char* fn) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw Error(str(fn, ": reduction is '", r, "', expected one of 'mean', 'sum', 'none'"));
}

Tensor reduce(const Tensor& l, Reduction r) {
  if (r == Reduction::Mean) return mean(l);
  if (r == Reduction::Sum) return sum(l);
  return l;
}

void check_float_input(const Tensor& input, const char* fn) {
  TR_CHECK(input.defined() && input.is_floating_point(), fn, ": input must be a floating tensor, got ",
           input.defined() ? dtype_name(input.dtype()) : "an undefined tensor");
}

// The shape class-index targets must have for `input`: the input's without the class dim 1.
Shape index_target_shape(const Tensor& input) {
  Shape s = input.sizes();
  s.erase(s.begin() + (input.dim() == 1 ? 0 : 1));
  return s;
}

// Cross entropy against probabilities y (the input's shape): -sum_c ((1-ls) y + ls/C) log p.
Tensor cross_entropy_probs(const Tensor& input, const Tensor& target, double ls, Reduction r) {
  TR_CHECK(target.sizes() == input.sizes(), "cross_entropy: probability targets must have the input's shape ",
           input.sizes(), ", got ", target.sizes());
  int64_t cdim = input.dim() == 1 ? 0 : 1;
  int64_t C = input.size(cdim);
  Tensor y = ls > 0.0 ? target * (1.0 - ls) + ls / double(C) : target;
  Tensor prod = log_softmax(input, cdim) * y;
  if (r == Reduction::None) return -sum(prod, {cdim});
  Tensor total = -sum(prod);
  if (r == Reduction::Sum) return total;
  return total / double(input.numel() / C);
}

}  // namespace

CrossEntropyOut cross_entropy_scored(const Tensor& input_arg, const Tensor& target_arg, int64_t ignore_index, double ls,
                                     const std::string& reduction) {
  const char* fn = "cross_entropy";
  Reduction r = parse_reduction(reduction, fn);
  check_float_input(input_arg, fn);
  TR_CHECK(input_arg.dim() >= 1, fn,
           ": input must have the classes in dim 1 ([N, C], [C] or [N, C, d1, ...]), got a 0-dim tensor");
  TR_CHECK(ls >= 0.0 && ls <= 1.0, fn, ": label_smoothing must be in [0, 1], got ", ls);
  TR_CHECK(target_arg.defined(), fn, ": target is undefined");
  // Class indices go through the fused op where it runs: it takes the logits in their own dtype
  // and computes in f32 itself, so autocast's f32 copy of [N, C] is never made.
  const bool fused = !target_arg.is_floating_point() && backends::fusion().enabled &&
                     has_kernel("cross_entropy_rows", input_arg.device());
  // autocast: losses run in f32 (torch's fp32 op list)
  const Tensor input = fused ? input_arg : amp::autocast_arg(amp::CastPolicy::Fp32, input_arg),
               target = amp::autocast_arg(amp::CastPolicy::Fp32, target_arg);
  if (target.is_floating_point()) return {cross_entropy_probs(input, target, ls, r), Tensor()};
  TR_CHECK(target.dtype() == DType::I64 || target.dtype() == DType::I32 || target.dtype() == DType::U8, fn,
           ": target must hold class indices (int64) or probabilities (floating), got ", dtype_name(target.dtype()));
  Shape want = index_target_shape(input);
  TR_CHECK(target.sizes() == want, fn, ": target of shape ", target.sizes(), " does not match input of shape ",
           input.sizes(), "; expected class indices of shape ", want, " (or probabilities of shape ", input.sizes(),
           ")");

  const int64_t cdim = input.dim() == 1 ? 0 : 1, C = input.size(cdim);
  // logits as rows [M, C] with the classes last, targets [M]
  Tensor x2;
  if (input.dim() == 1)
    x2 = input.unsqueeze(0);
  else if (input.dim() == 2)
    x2 = input;
  else
    x2 = input.transpose(1, -1).reshape({-1, C});  // the order of rows is irrelevant but must match target's
  Tensor t1 = target.to(DType::I64);
  if (input.dim() > 2)
    t1 = t1.transpose(1, -1).reshape({-1});
  else
    t1 = t1.reshape({-1});
  // per-row values [M] back to the target's shape [N, d1, ...]
  auto to_target_shape = [&](const Tensor& rows) {
    if (input.dim() > 2) {
      Shape s = target.sizes();
      std::swap(s[1], s.back());
      return rows.reshape(s).transpose(1, -1);
    }
    return rows.reshape(target.sizes());
  };

  Tensor valid = t1 != double(ignore_index);  // bool [M]
  Tensor oob = logical_and(valid, logical_not(logical_and(t1 >= 0.0, t1 < double(C))));
  // checked at once on the CPU, at the next wait for the device on a GPU (no stall per step)
  if (t1.numel() > 0)
    check_on_sync(sum(oob.to(DType::I64)).reshape({1}), 0,
                  [fn, t1, oob, C, ignore_index, in_shape = input.sizes(), t_shape = target.sizes(),
                   on_device = !t1.device().is_cpu()](int64_t) {
                    std::vector<double> tv = t1.tolist(), ov = oob.tolist();
                    for (size_t i = 0; i < tv.size(); ++i)
                      if (ov[i] != 0.0)
                        throw Error(str(fn, ": target ", int64_t(tv[i]), " is out of bounds for ", C,
                                        " classes (input shape ", in_shape, ", target shape ", t_shape, "; valid: 0..",
                                        C - 1, " or ignore_index = ", ignore_index, ")",
                                        on_device ? " (found on the device, raised at the next wait for it)" : ""));
                  });
  if (fused) {
    // rows' losses in f32 (f64), reduced with ordinary ops, then in the dtype the composite's
    // result has: the input's, f32 under autocast
    auto o = dispatch("cross_entropy_rows", {x2, t1}, {{"ignore_index", ignore_index}, {"label_smoothing", ls}});
    const DType res =
        amp::autocast_active(input.device().type) && input.dtype() != DType::F64 ? DType::F32 : input.dtype();
    Tensor loss;
    switch (r) {
      case Reduction::None: loss = to_target_shape(o[0]); break;
      case Reduction::Sum: loss = sum(o[0]); break;
      case Reduction::Mean: loss = sum(o[0]) / sum(valid.to(o[0].dtype())); break;
    }
    return {loss.to(res), to_target_shape(o[2])};
  }
  Tensor safe = where(valid, t1, zeros_like(t1));  // ignored rows pick class 0, then are zeroed
  Tensor logp = log_softmax(x2, 1);                // [M, C]
  Tensor zero = zeros({}, TensorOptions(logp.dtype()).device(logp.device()));
  Tensor nll = where(valid, -gather(logp, 1, safe.unsqueeze(1)).squeeze(1), zero);  // [M]
  Tensor smooth;
  if (ls > 0.0) smooth = where(valid, -sum(logp, {1}), zero);  // [M]

  auto combine = [&](const Tensor& a, const Tensor& b) { return ls > 0.0 ? a * (1.0 - ls) + b * (ls / double(C)) : a; };
  switch (r) {
    case Reduction::None: return {to_target_shape(combine(nll, smooth)), Tensor()};
    case Reduction::Sum: return {combine(sum(nll), ls > 0.0 ? sum(smooth) : Tensor()), Tensor()};
    case Reduction::Mean: {
      Tensor count = sum(valid.to(logp.dtype()));
      return {combine(sum(nll) / count, ls > 0.0 ? sum(smooth) / count : Tensor()), Tensor()};
    }
  }
  return {};
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index, double ls,
                     const std::string& reduction) {
  return cross_entropy_scored(input, target, ignore_index, ls, reduction).loss;
}

Tensor mse_loss(const Tensor& input_arg, const Tensor& target_arg, const std::string& reduction) {
  const char* fn = "mse_loss";
  const Tensor input = amp::autocast_arg(amp::CastPolicy::Fp32, input_arg),
               target = amp::autocast_arg(amp::CastPolicy::Fp32, target_arg);
  Reduction r = parse_reduction(reduction, fn);
  check_float_input(input, fn);
  TR_CHECK(target.defined() && target.is_floating_point(), fn, ": target must be a floating tensor, got ",
           target.defined() ? dtype_name(target.dtype()) : "an undefined tensor");
  TR_CHECK(target.sizes() == input.sizes(), fn, ": target of shape ", target.sizes(), " does not match input of shape ",
           input.sizes());
  Tensor d = input - target;
  return reduce(d * d, r);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input_arg, const Tensor& target_arg, const std::string& reduction,
                                        const Tensor& pos_weight_arg) {
  const char* fn = "binary_cross_entropy_with_logits";
  const Tensor input = amp::autocast_arg(amp::CastPolicy::Fp32, input_arg),
               target = amp::autocast_arg(amp::CastPolicy::Fp32, target_arg),
               pos_weight = amp::autocast_arg(amp::CastPolicy::Fp32, pos_weight_arg);
  Reduction r = parse_reduction(reduction, fn);
  check_float_input(input, fn);
  TR_CHECK(target.defined() && target.is_floating_point(), fn,
           ": target must be a floating tensor (0/1 labels or "
           "probabilities), got ",
           target.defined() ? dtype_name(target.dtype()) : "an undefined tensor");
  TR_CHECK(target.sizes() == input.sizes(), fn, ": target of shape ", target.sizes(), " does not match input of shape ",
           input.sizes());
  if (pos_weight.defined()) {
    TR_CHECK(pos_weight.is_floating_point(), fn, ": pos_weight must be floating, got ", dtype_name(pos_weight.dtype()));
    bool ok = pos_weight.dim() <= input.dim();
    for (int64_t i = 1; ok && i <= pos_weight.dim(); ++i)
      ok = pos_weight.size(-i) == 1 || pos_weight.size(-i) == input.size(-i);
    TR_CHECK(ok, fn, ": pos_weight of shape ", pos_weight.sizes(), " does not broadcast to the input shape ",
             input.sizes(), " (one weight per class of the last dim: [", input.dim() ? input.size(-1) : 1, "])");
  }
  // m only keeps exp() in range: the value and every derivative are independent of it, so it is a
  // constant for autograd (no kink at x = 0).
  Tensor m = relu(-input.detach());
  Tensor lse = log(exp(-m) + exp(-input - m));  // log(1 + exp(-x)) - m
  Tensor l;
  if (pos_weight.defined()) {
    Tensor lw = (pos_weight - 1.0) * target + 1.0;
    l = (1.0 - target) * input + lw * (lse + m);
  } else {
    l = ((1.0 - target) * input + m) + lse;
  }
  return reduce(l, r);
}

}  // namespace tr
