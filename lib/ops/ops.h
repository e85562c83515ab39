// The functional op API (torch.* / torch.nn.functional.*). Each function dispatches through the
// op registry, so it is differentiable and runs on the tensor's device.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/factories.h"
#include "ops/pair.h"

namespace tr {

// ---- elementwise binary (broadcasting, type promotion) ----
// Tensor name(const Tensor& a, const Tensor& b) for each op of binary_ops.def without an API of
// its own (mul, maximum, minimum) and of compare_ops.def (eq, ne, lt, le, gt, ge: bool results)
#define TR_BINARY_OP(NAME, ...) Tensor NAME(const Tensor& a, const Tensor& b);
#define TR_BINARY_OP_OWN_API(...)
#include "ops/binary_ops.def"
#define TR_COMPARE_OP(NAME, ...) Tensor NAME(const Tensor& a, const Tensor& b);
#include "ops/compare_ops.def"
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers divide in f32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double e);
Tensor pow(double base, const Tensor& e);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);

// ---- elementwise unary ----
// Tensor name(const Tensor& x) for each op of unary_ops.def without an API of its own and of
// predicate_ops.def (bool results)
#define TR_UNARY_OP(NAME, ...) Tensor NAME(const Tensor& x);
#define TR_UNARY_OP_OWN_API(...)
#include "ops/unary_ops.def"
#define TR_PREDICATE_OP(NAME, ...) Tensor NAME(const Tensor& x);
#include "ops/predicate_ops.def"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" (erf) | "tanh"
// g gelu'(x): one fused op where it has a kernel, else (and with backends::fusion() off) composite ops
// relu's gradient from its output y: g where y > threshold, else 0 (torch's threshold_backward)
Tensor threshold_backward(const Tensor& g, const Tensor& y, double threshold = 0.0);
Tensor gelu_backward(const Tensor& g, const Tensor& x, const std::string& approximate = "none");
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor cast(const Tensor& x, DType t);  // differentiable dtype conversion

// ---- reductions (dims empty = all dims) ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, double correction = 1.0, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1.0, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // all elements
Tensor min(const Tensor& x);
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// p-norm over dims (all when empty); p = INFINITY for the max-abs norm.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
// Whether any element of the (defined, non-empty) tensors is an inf or a NaN: a 0-dim bool on
// their device, one pass (the nonfinite check of a step's gradients).
Tensor any_non_finite(const std::vector<Tensor>& tensors);
// Sums `x` down to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra ----
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);  // torch.matmul semantics, batch broadcasting
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
// relu(linear(x, w, b)), the relu fused into the product's epilogue where linear's is
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---- softmax family and normalisation ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Their gradient from the output y (dim wrapped): y (g - sum_dim(g y)), or g - exp(y) sum_dim(g)
// for log_softmax; one fused op where the device has the kernel, else those composite ops.
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log);
// torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p, is_causal) for every head of
// q, k, v packed side by side as [B, T, 3C] (C = n_head x head dim), scale 1/sqrt(head dim); the
// heads' outputs side by side, [B, T, C]. dropout_p applies to the probabilities when training.
// One fused op (lib/ops/attention.cpp) where it can run, else the composite chain.
Tensor attention_qkvpacked(const Tensor& qkv, int64_t n_head, bool is_causal, double dropout_p = 0.0,
                           bool training = false);
// (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing normalized_shape dims.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// layer_norm(...).to(out_dtype) as one kernel where there is one: f16 / bf16 beside f32 rows, the
// norm rounded once (what reads it under autocast is a low-precision product)
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps,
                  DType out_dtype);
// s = x + h and layer_norm(s).to(out_dtype), the residual add fused into the norm's pass where x, h
// and the kernels allow (llm.c's fused residual): {s, y}
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& h, const Shape& normalized_shape,
                                         const Tensor& weight, const Tensor& bias, double eps, DType out_dtype);
// torch.nn.functional.batch_norm over dim 1 of x [N, C, *]: y = (x - mean) / sqrt(var + eps) * weight + bias.
// training: mean and biased var of the batch, returned (detached, [C]) for the caller's running
// statistics; otherwise running_mean / running_var (and the statistics come back undefined).
// weight / bias may be undefined (1 and 0). Fused ops where the device has them (lib/ops/batch_norm.cpp).
struct BatchNormOut {
  Tensor output, mean, var;
};
BatchNormOut batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                        const Tensor& bias, bool training, double eps = 1e-5);

// ---- shape / views ----
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);

// ---- indexing ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor one_hot(const Tensor& indices, int64_t num_classes);

// ---- convolution and pooling (NCHW) ----
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(), Pair stride = {1, 1}, Pair padding = {0, 0},
              Pair dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {}, Pair padding = {0, 0}, Pair dilation = {1, 1});
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {}, Pair padding = {0, 0}, bool count_include_pad = true);
// max_pool2d(relu(batch_norm(x))) of x [N, C, H, W] with the batch's statistics (training), which
// come back detached as batch_norm's: one fused op where fusion is on and the device has it
// (lib/ops/batch_norm_relu_pool.cpp), the chain otherwise. stride empty = kernel.
BatchNormOut batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                        Pair kernel, Pair stride = {}, Pair padding = {0, 0}, Pair dilation = {1, 1});

// ---- randomness (Philox, seeded by a Generator; default_generator() when none) ----
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = {DType::I64},
               Generator* gen = nullptr);
Tensor randperm(int64_t n, Generator* gen = nullptr);
// Keep-mask scaled by 1/(1-p): x * dropout_mask(x, p) is inverted dropout.
Tensor dropout_mask(const Tensor& like, double p, Generator* gen = nullptr);
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

// ---- losses (torch.nn.functional; lib/ops/loss.cpp). reduction: "mean" | "sum" | "none" ----
// Logits [N, C] (or [C], or [N, C, d1, ...] with the classes in dim 1) against
//  - class indices (integer) of shape [N] ([] / [N, d1, ...]): loss_i = (1-ls) (-log p_i[t_i])
//    + ls/C * sum_c (-log p_i[c]); targets equal to ignore_index contribute 0, and "mean" divides by
//    the number of targets that are not ignored (nan when all are);
//  - probabilities (floating, the input's shape): loss_i = -sum_c ((1-ls) y_ic + ls/C) log p_ic,
//    "mean" over the N*d1*... rows (ignore_index does not apply).
// For a GPT, pass logits [B*T, V] and targets [B*T]. Out-of-range class indices are an error.
Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, const std::string& reduction = "mean");
// cross_entropy, and where its fused op ran (class indices, backends::fusion() on, a kernel for the
// input's device) whether argmax over each target's classes equals the target (ties to the lowest
// index, a NaN wins, as argmax): bool of the target's shape, found in the loss's one pass over the
// logits (the accuracy metric at no cost); undefined where the composite ran.
struct CrossEntropyOut {
  Tensor loss, correct;
};
CrossEntropyOut cross_entropy_scored(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                                     double label_smoothing = 0.0, const std::string& reduction = "mean");
// (x - y)^2, same shapes.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// Numerically stable -[pw y log s(x) + (1-y) log(1-s(x))], s = sigmoid, computed as torch does:
// (1-y) x + lw (m + log(exp(-m) + exp(-x-m))), m = max(-x, 0), lw = 1 + (pw - 1) y (1 without pos_weight).
// pos_weight broadcasts against the input (one weight per class in the last dim).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::string& reduction = "mean", const Tensor& pos_weight = Tensor());

// ---- comparisons of whole tensors ----
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);

}  // namespace tr
