// The ops _fused_sgd_ and _fused_adam_: inputs are lists of equal length n laid end to end
// (params, grads, then the state tensors), attrs the hyperparameters; see fused_optim.h.
#include "ops/fused_optim.h"
#include <cmath>
#include "ops/registry.h"

namespace tr {

namespace {

void check_lists(const char* op, const std::vector<Tensor>& in, int64_t n, int64_t lists) {
  TR_CHECK(n >= 0 && int64_t(in.size()) == n * lists, op, ": expected ", lists, " lists of ", n, " tensors, got ",
           in.size(), " tensors");
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& p = in[size_t(i)];
    TR_CHECK(is_floating(p.dtype()), op, ": parameter ", i, " is ", dtype_name(p.dtype()),
             ", expected a floating dtype");
    for (int64_t l = 0; l < lists; ++l) {
      const Tensor& t = in[size_t(l * n + i)];
      TR_CHECK(t.dtype() == p.dtype() && t.sizes() == p.sizes() && t.is_contiguous(), op, ": tensor ", i, " of list ",
               l, " (", dtype_name(t.dtype()), ", shape ", t.sizes(), ") must be contiguous with parameter ", i, "'s ",
               dtype_name(p.dtype()), " and shape ", p.sizes());
    }
  }
}

}  // namespace

TR_REGISTER_OP(_fused_sgd_) {
  d.num_inputs = -1;
  d.differentiable = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const int64_t n = int64_t(a.ints("first").size());
    check_lists("_fused_sgd_", in, n, a.f("momentum") != 0 ? 3 : 2);
    return {};
  };
}

TR_REGISTER_OP(_fused_adam_) {
  d.num_inputs = -1;
  d.differentiable = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const int64_t n = int64_t(a.ints("steps").size());
    check_lists("_fused_adam_", in, n, a.b("amsgrad") ? 5 : 4);
    return {};
  };
}

optim_math::SgdScalars<double> sgd_scalars(const Attrs& a) {
  const double momentum = a.f("momentum"), wd = a.f("weight_decay");
  return {a.f("lr"), momentum, 1.0 - a.f("dampening"), wd, a.b("nesterov"), a.b("maximize"), momentum != 0, wd != 0};
}

optim_math::AdamScalars<double> adam_scalars(const Attrs& a, double t) {
  const double lr = a.f("lr"), b1 = a.f("beta1"), b2 = a.f("beta2"), wd = a.f("weight_decay");
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  return {b1,
          1.0 - b1,
          b2,
          1.0 - b2,
          a.f("eps"),
          wd,
          1.0 - lr * wd,
          -(lr / bc1),
          std::sqrt(bc2),
          a.b("decoupled"),
          a.b("amsgrad"),
          a.b("maximize"),
          wd != 0};
}

bool fusable(const std::vector<std::vector<Tensor>>& lists) {
  if (lists.empty() || lists[0].empty()) return false;
  const Device dev = lists[0][0].device();
  for (size_t i = 0; i < lists[0].size(); ++i) {
    const Tensor& p = lists[0][i];
    if (!is_floating(p.dtype())) return false;
    for (const auto& l : lists) {
      const Tensor& t = l[i];
      if (!t.defined() || t.device() != dev || t.dtype() != p.dtype() || t.sizes() != p.sizes() || !t.is_contiguous())
        return false;
    }
  }
  return true;
}

void fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, const FusedSgdOptions& o) {
  if (params.empty()) return;
  std::vector<Tensor> in(params);
  in.insert(in.end(), grads.begin(), grads.end());
  in.insert(in.end(), momentum_buffers.begin(), momentum_buffers.end());
  std::vector<int64_t> f(first.begin(), first.end());
  dispatch("_fused_sgd_", std::move(in),
           {{"lr", o.lr},
            {"momentum", o.momentum},
            {"dampening", o.dampening},
            {"weight_decay", o.weight_decay},
            {"nesterov", o.nesterov},
            {"maximize", o.maximize},
            {"first", f}});
}

void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& steps,
                 const FusedAdamOptions& o) {
  if (params.empty()) return;
  std::vector<Tensor> in(params);
  for (const auto* l : {&grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}) in.insert(in.end(), l->begin(), l->end());
  // step counts are whole numbers kept in f32 (torch's step tensor): exact as int64
  std::vector<int64_t> s;
  for (double t : steps) s.push_back(int64_t(t));
  dispatch("_fused_adam_", std::move(in),
           {{"lr", o.lr},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps},
            {"weight_decay", o.weight_decay},
            {"decoupled", o.decoupled},
            {"amsgrad", o.amsgrad},
            {"maximize", o.maximize},
            {"steps", s}});
}

}  // namespace tr
