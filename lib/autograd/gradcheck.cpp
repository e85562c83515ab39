#include "autograd/gradcheck.h"
#include <cmath>
#include "autograd/engine.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr {

namespace {

// Flat f64 view of all output elements.
std::vector<double> flat_outputs(const std::vector<Tensor>& outs) {
  std::vector<double> r;
  for (auto& o : outs) {
    if (!o.defined() || !o.is_floating_point()) continue;
    auto v = o.tolist();
    r.insert(r.end(), v.begin(), v.end());
  }
  return r;
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opt) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad())
      TR_CHECK(inputs[i].dtype() == DType::F64, "gradcheck: input ", i, " has dtype ", dtype_name(inputs[i].dtype()),
               "; gradcheck needs float64 inputs for finite differences to be accurate");
  }
  std::vector<Tensor> outs = fn(inputs);
  std::vector<Tensor> diff_outs;
  for (auto& o : outs)
    if (o.defined() && o.is_floating_point()) diff_outs.push_back(o);
  std::vector<double> y0 = flat_outputs(diff_outs);
  size_t m = y0.size();

  // Analytical Jacobian, one row per output element: grad of output element j w.r.t. inputs.
  std::vector<size_t> in_idx;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad()) in_idx.push_back(i);
  std::vector<std::vector<std::vector<double>>> analytical(in_idx.size(), std::vector<std::vector<double>>(m));
  size_t row = 0;
  for (size_t oi = 0; oi < diff_outs.size(); ++oi) {
    const Tensor& o = diff_outs[oi];
    for (int64_t e = 0; e < o.numel(); ++e, ++row) {
      std::vector<Tensor> gos;
      for (size_t k = 0; k < diff_outs.size(); ++k) {
        Tensor g = zeros_like(diff_outs[k]);
        if (k == oi) {
          NoGradGuard ng;
          g.view({-1}).narrow(0, e, 1).fill_(1.0);
        }
        gos.push_back(g);
      }
      std::vector<Tensor> ins;
      for (auto i : in_idx) ins.push_back(inputs[i]);
      bool any_graph = false;
      for (auto& d : diff_outs) any_graph = any_graph || d.requires_grad();
      std::vector<Tensor> gr;
      if (any_graph)
        gr = autograd::grad(diff_outs, ins, gos, true, false, true);
      else
        gr.resize(ins.size());
      for (size_t k = 0; k < ins.size(); ++k) {
        if (gr[k].defined())
          analytical[k][row] = gr[k].tolist();
        else
          analytical[k][row] = std::vector<double>(size_t(ins[k].numel()), 0.0);
      }
    }
  }

  // Numerical Jacobian by central differences, perturbing each input element in place.
  for (size_t k = 0; k < in_idx.size(); ++k) {
    Tensor x = inputs[in_idx[k]];
    Tensor flat = x.detach();  // shares storage
    int64_t n = x.numel();
    for (int64_t e = 0; e < n; ++e) {
      Tensor cell;
      double orig;
      {
        NoGradGuard ng;
        TR_CHECK(flat.is_contiguous(), "gradcheck: inputs must be contiguous");
        cell = flat.view({-1}).narrow(0, e, 1);
        orig = cell.item();
        cell.fill_(orig + opt.eps);
      }
      // fn runs with grad mode on: gradgradcheck's fn differentiates inside.
      std::vector<double> yp = flat_outputs(fn(inputs));
      {
        NoGradGuard ng;
        cell.fill_(orig - opt.eps);
      }
      std::vector<double> ym = flat_outputs(fn(inputs));
      {
        NoGradGuard ng;
        cell.fill_(orig);
      }
      for (size_t j = 0; j < m; ++j) {
        double num = (yp[j] - ym[j]) / (2 * opt.eps);
        double ana = analytical[k][j][size_t(e)];
        if (!(std::abs(num - ana) <= opt.atol + opt.rtol * std::abs(num))) {
          return {false, str("Jacobian mismatch for output element ", j, " with respect to input ", in_idx[k],
                             " element ", e, ": numerical ", num, ", analytical ", ana)};
        }
      }
    }
  }
  return {};
}

GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opt) {
  std::vector<Tensor> outs = fn(inputs);
  Generator gen(1234);
  std::vector<Tensor> grad_outs;
  for (auto& o : outs) {
    if (!o.defined() || !o.is_floating_point()) continue;
    grad_outs.push_back(randn(o.sizes(), TensorOptions(o.dtype()), &gen).to(o.device()).requires_grad_(true));
  }
  size_t n_in = inputs.size();
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), grad_outs.begin(), grad_outs.end());
  TensorFn first_derivative = [&, n_in](const std::vector<Tensor>& xs) {
    std::vector<Tensor> ins(xs.begin(), xs.begin() + long(n_in));
    std::vector<Tensor> gos(xs.begin() + long(n_in), xs.end());
    std::vector<Tensor> o = fn(ins);
    std::vector<Tensor> diff;
    for (auto& t : o)
      if (t.defined() && t.is_floating_point()) diff.push_back(t);
    std::vector<Tensor> req;
    for (auto& t : ins)
      if (t.requires_grad()) req.push_back(t);
    bool any = false;
    for (auto& d : diff) any = any || d.requires_grad();
    if (!any) return std::vector<Tensor>{};
    std::vector<Tensor> g = autograd::grad(diff, req, gos, true, true, true);
    std::vector<Tensor> r;
    for (size_t i = 0; i < g.size(); ++i) r.push_back(g[i].defined() ? g[i] : zeros_like(req[i]));
    return r;
  };
  return gradcheck(first_derivative, all, opt);
}

}  // namespace tr
