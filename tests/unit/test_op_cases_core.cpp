// Gradcheck cases for the core ops (pointwise, reductions, views, linear algebra, softmax,
// indexing). Inputs avoid kinks (ties, zeros) where finite differences are not valid.
#include <cmath>
#include "op_cases.h"
#include "ops/registry.h"

namespace test_op_cases_core {

using namespace tr;
using namespace tr::test;

namespace {
// int64 indices on the device of `like` (the case's first input: the cases also run on CUDA)
Tensor idx(std::vector<double> v, Shape s, const Tensor& like) {
  return from_vector(v, s, DType::I64).to(like.device());
}
Tensor distinct(const Shape& s) {  // distinct values: no ties for max/min
  Tensor t = sin(arange(0.0, double(numel_of(s)), 1.0, DType::F64) * 0.37).reshape(s) * 2.0;
  return t.detach().requires_grad_(true);
}
}  // namespace

// ---- pointwise binary ----
TR_OP_CASE("add", "broadcast alpha", ({randn64({2, 3}, 1), randn64({3}, 2)}),
           [](const Inputs& x) { return Outputs{add(x[0], x[1], 0.5)}; });
TR_OP_CASE("add", "scalar", ({randn64({4}, 1)}), [](const Inputs& x) { return Outputs{x[0] + 2.0}; });
TR_OP_CASE("sub", "broadcast alpha", ({randn64({2, 1, 3}, 3), randn64({4, 1}, 4)}),
           [](const Inputs& x) { return Outputs{sub(x[0], x[1], 2.0)}; });
TR_OP_CASE("mul", "broadcast", ({randn64({2, 3}, 5), randn64({1, 3}, 6)}),
           [](const Inputs& x) { return Outputs{x[0] * x[1]}; });
TR_OP_CASE("div", "broadcast", ({randn64({2, 3}, 7), uniform64({3}, 0.5, 2.0, 8)}),
           [](const Inputs& x) { return Outputs{x[0] / x[1]}; });
TR_OP_CASE("pow", "tensor exponent", ({uniform64({2, 3}, 0.5, 2.0, 9), randn64({2, 3}, 10)}),
           [](const Inputs& x) { return Outputs{pow(x[0], x[1])}; });
TR_OP_CASE("pow", "scalar exponent", ({randn64({5}, 11)}), [](const Inputs& x) { return Outputs{pow(x[0], 3.0)}; });
TR_OP_CASE("pow", "scalar base", ({randn64({5}, 12)}), [](const Inputs& x) { return Outputs{pow(2.0, x[0])}; });
TR_OP_CASE("maximum", "no ties", ({randn64({3, 4}, 13), randn64({4}, 14)}),
           [](const Inputs& x) { return Outputs{maximum(x[0], x[1])}; });
TR_OP_CASE("minimum", "no ties", ({randn64({3, 4}, 15), randn64({3, 1}, 16)}),
           [](const Inputs& x) { return Outputs{minimum(x[0], x[1])}; });
TR_OP_CASE("where", "broadcast", ({randn64({3, 4}, 17), randn64({4}, 18)}),
           [](const Inputs& x) { return Outputs{where(x[0].detach() > 0.0, x[0], x[1])}; });

// ---- pointwise unary ----
TR_OP_CASE("neg", "basic", ({randn64({3, 2}, 19)}), [](const Inputs& x) { return Outputs{-x[0]}; });
TR_OP_CASE("abs", "away from 0", ({randn64({6}, 20)}), [](const Inputs& x) { return Outputs{abs(x[0])}; });
TR_OP_CASE("sign", "zero gradient", ({randn64({6}, 21)}), [](const Inputs& x) { return Outputs{sign(x[0]) * x[0]}; });
TR_OP_CASE("exp", "basic", ({randn64({2, 3}, 22)}), [](const Inputs& x) { return Outputs{exp(x[0])}; });
TR_OP_CASE("log", "positive", ({uniform64({2, 3}, 0.5, 3.0, 23)}), [](const Inputs& x) { return Outputs{log(x[0])}; });
TR_OP_CASE("sqrt", "positive", ({uniform64({2, 3}, 0.5, 3.0, 24)}),
           [](const Inputs& x) { return Outputs{sqrt(x[0])}; });
TR_OP_CASE("rsqrt", "positive", ({uniform64({2, 3}, 0.5, 3.0, 25)}),
           [](const Inputs& x) { return Outputs{rsqrt(x[0])}; });
TR_OP_CASE("sin", "basic", ({randn64({4}, 26)}), [](const Inputs& x) { return Outputs{sin(x[0])}; });
TR_OP_CASE("cos", "basic", ({randn64({4}, 27)}), [](const Inputs& x) { return Outputs{cos(x[0])}; });
TR_OP_CASE("erf", "basic", ({randn64({4}, 28)}), [](const Inputs& x) { return Outputs{erf(x[0])}; });
TR_OP_CASE("tanh", "basic", ({randn64({2, 3}, 29)}), [](const Inputs& x) { return Outputs{tanh(x[0])}; });
TR_OP_CASE("sigmoid", "basic", ({randn64({2, 3}, 30)}), [](const Inputs& x) { return Outputs{sigmoid(x[0])}; });
TR_OP_CASE("relu", "away from 0", ({randn64({2, 5}, 31)}), [](const Inputs& x) { return Outputs{relu(x[0])}; });
TR_OP_CASE("gelu", "erf", ({randn64({2, 5}, 32)}), [](const Inputs& x) { return Outputs{gelu(x[0])}; });
TR_OP_CASE("gelu", "tanh", ({randn64({2, 5}, 33)}), [](const Inputs& x) { return Outputs{gelu(x[0], "tanh")}; });
TR_OP_CASE("silu", "basic", ({randn64({2, 5}, 34)}), [](const Inputs& x) { return Outputs{silu(x[0])}; });
TR_OP_CASE("softplus", "beta and threshold", ({randn64({2, 5}, 35) * 3.0}),
           [](const Inputs& x) { return Outputs{softplus(x[0], 2.0, 4.0)}; });
TR_OP_CASE("clamp", "both bounds", ({randn64({10}, 36)}),
           [](const Inputs& x) { return Outputs{clamp(x[0], -0.5, 0.7)}; });
// (a round trip through f32 is too coarse for finite differences; the dtype handling of cast's
// backward is tested in test_autograd.cpp)
TR_OP_CASE("cast", "identity dtype", ({randn64({3}, 37)}), [](const Inputs& x) {
  return Outputs{dispatch1("cast", {x[0]}, {{"dtype", int64_t(DType::F64)}}) * x[0]};
});

// ---- reductions ----
TR_OP_CASE("sum", "all", ({randn64({2, 3, 4}, 40)}), [](const Inputs& x) { return Outputs{sum(x[0])}; });
TR_OP_CASE("sum", "dims keepdim", ({randn64({2, 3, 4}, 41)}), [](const Inputs& x) {
  return Outputs{sum(x[0], {0, 2}, true)};
});
TR_OP_CASE("sum", "leading dim", ({randn64({5, 3}, 42)}), [](const Inputs& x) { return Outputs{sum(x[0], {0})}; });
TR_OP_CASE("amax", "dim", ({distinct({3, 4})}), [](const Inputs& x) { return Outputs{amax(x[0], {1})}; });
TR_OP_CASE("amin", "all", ({distinct({3, 4})}), [](const Inputs& x) { return Outputs{amin(x[0])}; });
TR_OP_CASE("max_dim", "values", ({distinct({3, 4})}), [](const Inputs& x) { return Outputs{max(x[0], 0).values}; });
TR_OP_CASE("min_dim", "values keepdim", ({distinct({3, 4})}),
           [](const Inputs& x) { return Outputs{min(x[0], 1, true).values}; });
TR_OP_CASE("var", "unbiased dims", ({randn64({3, 4}, 43)}), [](const Inputs& x) { return Outputs{var(x[0], {1})}; });
TR_OP_CASE("var", "biased all keepdim", ({randn64({3, 4}, 44)}),
           [](const Inputs& x) { return Outputs{var(x[0], {}, 0.0, true)}; });
TR_OP_CASE("norm", "p=2", ({randn64({3, 4}, 45)}), [](const Inputs& x) { return Outputs{norm(x[0])}; });
TR_OP_CASE("norm", "p=3 dim", ({randn64({3, 4}, 46)}), [](const Inputs& x) { return Outputs{norm(x[0], 3.0, {1})}; });
TR_OP_CASE("norm", "p=1", ({randn64({5}, 47)}), [](const Inputs& x) { return Outputs{norm(x[0], 1.0)}; });
TR_OP_CASE_FIRST_ORDER("norm", "p=inf", ({distinct({6})}),
                       [](const Inputs& x) { return Outputs{norm(x[0], INFINITY)}; });

// ---- linear algebra ----
TR_OP_CASE("mm", "basic", ({randn64({3, 4}, 50), randn64({4, 2}, 51)}),
           [](const Inputs& x) { return Outputs{mm(x[0], x[1])}; });
TR_OP_CASE("mm", "transposed operands", ({randn64({4, 3}, 52), randn64({2, 4}, 53)}),
           [](const Inputs& x) { return Outputs{mm(x[0].t(), x[1].t())}; });
TR_OP_CASE("bmm", "basic", ({randn64({2, 3, 4}, 54), randn64({2, 4, 2}, 55)}),
           [](const Inputs& x) { return Outputs{bmm(x[0], x[1])}; });
TR_OP_CASE("mm", "matmul broadcast batch", ({randn64({2, 1, 3, 4}, 56), randn64({3, 4, 2}, 57)}),
           [](const Inputs& x) { return Outputs{matmul(x[0], x[1])}; });

// ---- softmax ----
TR_OP_CASE("softmax", "last dim", ({randn64({3, 4}, 60)}), [](const Inputs& x) { return Outputs{softmax(x[0], -1)}; });
TR_OP_CASE("softmax", "dim 0 of 3-D", ({randn64({3, 2, 2}, 61)}),
           [](const Inputs& x) { return Outputs{softmax(x[0], 0)}; });
TR_OP_CASE("log_softmax", "last dim", ({randn64({3, 4}, 62)}),
           [](const Inputs& x) { return Outputs{log_softmax(x[0], 1)}; });
TR_OP_CASE("log_softmax", "middle dim", ({randn64({2, 3, 2}, 63)}),
           [](const Inputs& x) { return Outputs{log_softmax(x[0], 1)}; });

// ---- views ----
TR_OP_CASE("view", "reshape", ({randn64({2, 6}, 70)}), [](const Inputs& x) {
  return Outputs{x[0].view({3, 4}) * 2.0};
});
TR_OP_CASE("transpose", "basic", ({randn64({2, 3}, 71)}),
           [](const Inputs& x) { return Outputs{x[0].transpose(0, 1) * x[0].transpose(0, 1)}; });
TR_OP_CASE("permute", "3-D", ({randn64({2, 3, 4}, 72)}), [](const Inputs& x) {
  return Outputs{x[0].permute({2, 0, 1}).contiguous() * 1.5};
});
TR_OP_CASE("slice", "step 2", ({randn64({5, 3}, 73)}),
           [](const Inputs& x) { return Outputs{x[0].slice(0, 1, 5, 2) * x[0].slice(0, 0, 4, 2)}; });
TR_OP_CASE("slice_backward", "through double backward", ({randn64({4, 3}, 74), randn64({2, 3}, 75)}),
           [](const Inputs& x) {
             return Outputs{dispatch1("slice_backward", {x[1]},
                                      {{"input_sizes", Shape{4, 3}},
                                       {"dim", int64_t(0)},
                                       {"start", int64_t(1)},
                                       {"end", int64_t(3)},
                                       {"step", int64_t(1)}}) *
                            x[0]};
           });
TR_OP_CASE("select", "row", ({randn64({3, 4}, 76)}),
           [](const Inputs& x) { return Outputs{x[0].select(0, 1) * x[0].select(1, 2).sum()}; });
TR_OP_CASE("unsqueeze", "basic", ({randn64({3}, 77)}),
           [](const Inputs& x) { return Outputs{x[0].unsqueeze(1) * x[0].unsqueeze(0)}; });
TR_OP_CASE("squeeze", "all", ({randn64({1, 3, 1}, 78)}), [](const Inputs& x) { return Outputs{x[0].squeeze() * 2.0}; });
TR_OP_CASE("expand", "broadcast", ({randn64({3, 1}, 79)}), [](const Inputs& x) {
  return Outputs{x[0].expand({2, 3, 4}) * 1.0};
});
// _to_copy onto the input's own device (the only pair every build has): a copy whose gradient
// goes back; CUDA <-> CPU pairs are [gpu] tests in test_cuda.cpp.
Outputs to_copy_same_device(const Inputs& x) {
  const Device d = x[0].device();
  const Attrs a{{"dst_type", int64_t(d.type)},
                {"dst_index", int64_t(d.index)},
                {"src_type", int64_t(d.type)},
                {"src_index", int64_t(d.index)}};
  return Outputs{dispatch1("_to_copy", {x[0]}, a) * x[0]};
}
TR_OP_CASE("_to_copy", "to the same device", ({randn64({2, 3}, 81)}), to_copy_same_device);
TR_OP_CASE("clone", "strided", ({randn64({3, 4}, 80)}),
           [](const Inputs& x) { return Outputs{x[0].t().clone() * x[0].t()}; });

// ---- indexing ----
TR_OP_CASE("index_select", "rows with repeats", ({randn64({4, 3}, 90)}), [](const Inputs& x) {
  return Outputs{index_select(x[0], 0, idx({2, 0, 2}, {3}, x[0]))};
});
TR_OP_CASE("index_add", "repeats", ({randn64({4, 3}, 91), randn64({3, 3}, 92)}), [](const Inputs& x) {
  return Outputs{index_add(x[0], 0, idx({1, 3, 1}, {3}, x[0]), x[1]) * x[0]};
});
TR_OP_CASE("gather", "dim 1", ({randn64({3, 4}, 93)}), [](const Inputs& x) {
  return Outputs{gather(x[0], 1, idx({0, 3, 1, 1, 2, 0}, {3, 2}, x[0])) * 2.0};
});
TR_OP_CASE("scatter_add", "dim 0", ({randn64({3, 2}, 94), randn64({2, 2}, 95)}), [](const Inputs& x) {
  return Outputs{scatter_add(x[0], 0, idx({2, 0, 2, 2}, {2, 2}, x[0]), x[1]) * x[0]};
});
TR_OP_CASE("index_select", "embedding", ({randn64({5, 3}, 96)}), [](const Inputs& x) {
  return Outputs{embedding(x[0], idx({4, 0, 4, 1}, {2, 2}, x[0]))};
});
TR_OP_CASE("cat", "dim 1 three inputs", ({randn64({2, 1}, 97), randn64({2, 3}, 98), randn64({2, 2}, 99)}),
           [](const Inputs& x) {
             return Outputs{cat({x[0], x[1], x[2]}, 1) * 1.5};
           });
TR_OP_CASE("cat", "stack", ({randn64({2, 3}, 100), randn64({2, 3}, 101)}), [](const Inputs& x) {
  return Outputs{stack({x[0], x[1]}, 1) * 1.5};
});

}  // namespace test_op_cases_core
