// The interface between the CUDA launchers (*.cpp: Tensor -> raw arguments) and the kernels
// (*_kernels.cu): plain structs of pointers, sizes and strides passed by value, and the host
// functions that pick the kernel for a dtype. No Tensor here, so the .cu files stay light.
#pragma once
#include <cstdint>
#include "core/dtype.h"
#include "ops/attention_math.h"
#include "ops/op_tables.h"
#include "ops/optim_math.h"
#include "ops/pool_math.h"

namespace tr::cuda {

constexpr int kMaxDims = 8;        // dims of one elementwise / reduction launch (after merging)
constexpr int kMaxOperands = 4;    // output + up to 3 inputs (where)
constexpr int kMaxIndexDims = 16;  // gather / scatter_add

// N operands over one shape; operand 0 is the output. An input with ptr == nullptr is a host
// scalar: `scalar` holds the raw bits of one element of its dtype (all strides 0).
struct ElementwiseArgs {
  int ndim = 0;
  int nops = 0;
  bool index32 = true;  // numel < 2^31: index arithmetic in 32 bits
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxOperands][kMaxDims] = {};  // in elements
  void* ptr[kMaxOperands] = {};
  uint64_t scalar[kMaxOperands] = {};
};

// The op of a pointwise launch, one enumerator per line of its table (ops/*_ops.def): the
// kernels switch on it; which dtypes it takes is its line's, not its position's.
enum class UnaryOp : int32_t {
#define TR_UNARY_OP(NAME, OP, ...) OP,
#include "ops/unary_ops.def"
};
enum class BinaryOp : int32_t {
#define TR_BINARY_OP(NAME, OP, ...) OP,
#include "ops/binary_ops.def"
};
enum class CompareOp : int32_t {
#define TR_COMPARE_OP(NAME, OP, ...) OP,
#include "ops/compare_ops.def"
};
enum class PredicateOp : int32_t {
#define TR_PREDICATE_OP(NAME, OP, ...) OP,
#include "ops/predicate_ops.def"
};

// y = op(x) for x, y of dtype `t`.
void launch_unary(UnaryOp op, DType t, const PointwiseParams& p, const ElementwiseArgs& a);
// y = op(x0, x1) for x0, x1, y of dtype `t`.
void launch_binary(BinaryOp op, DType t, const PointwiseParams& p, const ElementwiseArgs& a);
// f32 out of a (dtype ta) and b (tb), one f32 and the other f32, f16 or bf16, computed in f32
void launch_binary_mixed(BinaryOp op, DType ta, DType tb, const PointwiseParams& p, const ElementwiseArgs& a);
// bool y = x0 OP x1 for inputs of dtype `t`.
void launch_compare(CompareOp op, DType t, const ElementwiseArgs& a);
// bool y = pred(x) for x of dtype `t`.
void launch_predicate(PredicateOp op, DType t, const ElementwiseArgs& a);
// bool y = x0 && x1 (bool inputs).
void launch_logical_and(const ElementwiseArgs& a);
// y = threshold_backward(g, x) (scalar_math.h) for g, x, y of dtype `t`.
void launch_threshold_backward(DType t, double threshold, const ElementwiseArgs& a);
// y = g gelu'(x) (scalar_math.h's gelu_backward_erf / _tanh) for g, x, y of a float dtype `t`.
void launch_gelu_backward(DType t, bool tanh_form, const ElementwiseArgs& a);
// y = cond ? x1 : x2; elements of x1, x2, y have `elem_size` bytes.
void launch_where(size_t elem_size, const ElementwiseArgs& a);
// y = x bit for bit (same dtype, or fill_ from a host scalar); elements of `elem_size` bytes.
void launch_copy(size_t elem_size, const ElementwiseArgs& a);
// y = convert<dst>(x), the conversion rules of the CPU's cast.
void launch_cast(DType dst, DType src, const ElementwiseArgs& a);

// ---- reductions ----
// Output o (row-major over the kept dims, written contiguously) reduces K input elements: input
// offset = sum kept_idx * out_strides + sum red_idx * red_strides.
struct ReduceArgs {
  int64_t M = 0;  // outputs
  int64_t K = 0;  // elements per output
  int out_ndim = 0, red_ndim = 0;
  bool red_inner = true;  // lanes of a warp walk the reduced dims (else the outputs)
  int64_t out_sizes[kMaxDims] = {}, out_strides[kMaxDims] = {};
  int64_t red_sizes[kMaxDims] = {}, red_strides[kMaxDims] = {};
  const void* in = nullptr;
};
enum class ReduceOp : int32_t { Sum, Max, Min, VarMean, Var };
struct ReduceOutputs {
  void* values = nullptr;      // sum / amax / max_dim values / var (dtype of the op's output)
  int64_t* indices = nullptr;  // max_dim / argmax indices
  double* mean = nullptr;      // VarMean writes, Var reads: per-output means in double
  double correction = 0;       // Var: divide by max(0, K - correction)
};
// Splits of K across blocks (1: one pass) and bytes of workspace the split pass needs.
struct ReducePlan {
  int splits = 1;
  size_t workspace_bytes = 0;
};
ReducePlan plan_reduce(ReduceOp op, DType t, const ReduceArgs& a, int device);
void launch_reduce(ReduceOp op, DType t, const ReduceArgs& a, const ReducePlan& plan, void* workspace,
                   const ReduceOutputs& out);

// ---- softmax: rows of length `len` along one dim ----
struct SoftmaxArgs {
  int64_t rows = 0, len = 0;
  int ndim = 0;  // kept dims (all but the softmax dim)
  int64_t sizes[kMaxDims] = {}, in_strides[kMaxDims] = {}, out_strides[kMaxDims] = {};
  int64_t in_dim_stride = 0, out_dim_stride = 0;
  const void* in = nullptr;
  void* out = nullptr;
};
void launch_softmax(bool log, DType t, const SoftmaxArgs& a);
// softmax's gradient from its output: a.in is y, `grad` g with y's strides, a.out the result:
//   y (g - sum g y), or with log  g - exp(y) sum g  (scalar_math.h / the CPU kernel's formulas)
void launch_softmax_backward(bool log, DType t, const SoftmaxArgs& a, const void* grad);

// ---- indexing: int64 indices; an out-of-range index sets *error to its position ----
// out[o, j, i] = x[o, idx[j], i] (x and out contiguous)
void launch_index_select(size_t elem_size, const void* x, void* out, const int64_t* idx, int64_t outer, int64_t n,
                         int64_t m, int64_t inner, unsigned long long* error);
// out[o, idx[j], i] += src[o, j, i] (out and src contiguous)
void launch_index_add(DType t, void* out, const void* src, const int64_t* idx, int64_t outer, int64_t n, int64_t m,
                      int64_t inner, unsigned long long* error);
struct IndexArgs {
  int ndim = 0;
  int dim = 0;
  int64_t numel = 0;                        // elements of index
  int64_t bound = 0;                        // size of self / x along dim
  int64_t sizes[kMaxIndexDims] = {};        // index shape (index contiguous)
  int64_t x_strides[kMaxIndexDims] = {};    // gather: x; scatter_add: out
  int64_t src_strides[kMaxIndexDims] = {};  // scatter_add: src
};
// out[p] = x[p with p[dim] = idx[p]] (out contiguous, shaped like idx)
void launch_gather(size_t elem_size, const IndexArgs& a, const void* x, void* out, const int64_t* idx,
                   unsigned long long* error);
// out[p with p[dim] = idx[p]] += src[p]
void launch_scatter_add(DType t, const IndexArgs& a, void* out, const void* src, const int64_t* idx,
                        unsigned long long* error);

// ---- matrix products of integer dtypes (cuBLAS has none): out[b] = a[b] @ bm[b], int64 accumulation ----
struct IntGemmArgs {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  int64_t a_strides[3] = {}, b_strides[3] = {};  // (batch, row, col) in elements
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;  // contiguous [batch, M, N]
};
void launch_int_gemm(DType t, const IntGemmArgs& a);

// ---- pooling over contiguous NCHW planes (ops/pool_math.h geometry) ----
// y = max over each window, idx = its flat argmax in the plane
void launch_max_pool2d(DType t, const pool::Geom& g, const void* x, void* y, int64_t* idx);
// gx = the adjoint of max_pool2d: gathered from the windows over each input when `windows` (g's
// kernel, stride, padding and dilation are set), else scattered plane by plane in output order;
// a scattered index outside the plane sets *error to its position.
void launch_max_pool2d_backward(DType t, const pool::Geom& g, bool windows, const void* gy, const int64_t* idx,
                                void* gx, unsigned long long* error);
void launch_avg_pool2d(DType t, const pool::Geom& g, bool count_include_pad, const void* x, void* y);
void launch_avg_pool2d_backward(DType t, const pool::Geom& g, bool count_include_pad, const void* gy, void* gx);

// ---- batch norm over x viewed as [N, C, L] (contiguous), statistics in double ----
struct BatchNormGeom {
  int64_t N = 0, C = 0, L = 0;
  double eps = 0;
};
// mean / biased var per channel into mean_out / var_out, y = x alpha + beta; `coef` is device
// scratch of 2 C doubles.
void launch_batch_norm(DType t, const BatchNormGeom& g, const void* x, const void* w, const void* b, void* y,
                       void* mean_out, void* var_out, double* coef);
// gx, gw, gb of batch_norm; `coef` is device scratch of 4 C doubles.
void launch_batch_norm_backward(DType t, const BatchNormGeom& g, const void* gy, const void* x, const void* w,
                                const void* mean, const void* var, void* gx, void* gw, void* gb, double* coef);
// y = x alpha + beta from given statistics; `coef` is device scratch of 2 C doubles.
void launch_batch_norm_elemt(DType t, const BatchNormGeom& g, const void* x, const void* w, const void* b,
                             const void* mean, const void* var, void* y, double* coef);
// y, idx = max_pool2d(relu(batch_norm(x))) with pg's windows over x's [H, W] planes, and the batch
// statistics; `coef` is device scratch of 2 C doubles.
void launch_batch_norm_relu_max_pool2d(DType t, const BatchNormGeom& g, const pool::Geom& pg, const void* x,
                                       const void* w, const void* b, void* y, int64_t* idx, void* mean_out,
                                       void* var_out, double* coef);
// gx, gw, gb of it from the pool's gradient gy, output y and indices; `coef` is device scratch of
// 4 C doubles.
void launch_batch_norm_relu_max_pool2d_backward(DType t, const BatchNormGeom& g, const pool::Geom& pg, const void* gy,
                                                const void* x, const void* w, const void* mean, const void* var,
                                                const void* y, const int64_t* idx, void* gx, void* gw, void* gb,
                                                double* coef);

// ---- layer norm over contiguous rows [R, N] of dtype t; mean / rstd f32 (f64 for f64 rows);
// y of dtype yt: t, or f16 / bf16 beside f32 rows (ops/layer_norm_math.h). With h (dtype ht: t or
// yt) the rows normalised are x + h, written to s. ----
struct LayerNormArgs {
  DType t, yt, ht;
  int64_t R, N;
  double eps;
  const void *x, *h, *w, *b;  // h may be null
  void *s, *y, *mean, *rstd;  // s only with h
};
void launch_layer_norm(const LayerNormArgs& a);
// gx = gs + d(norm)/dx (gs may be null), gh = gx in gy's dtype gt where gh is not null; gw, gb.
// `partial` is device scratch of 2 N ceil(R / kLayerNormRowsPerPartial) doubles.
constexpr int64_t kLayerNormRowsPerPartial = 64;
struct LayerNormBackwardArgs {
  DType t, gt;
  int64_t R, N;
  const void *gy, *x, *w, *mean, *rstd, *gs;
  void *gx, *gh, *gw, *gb;
  double* partial;
};
void launch_layer_norm_backward(const LayerNormBackwardArgs& a);

// ---- cross entropy over contiguous rows x [N, V] with int64 targets t [N] (ops/cross_entropy_math.h);
// loss, lse and the row gradients of the compute type (f32, f64 for f64 rows) ----
struct CrossEntropyArgs {
  int64_t N = 0, V = 0, ignore_index = -100;
  double label_smoothing = 0;
  const void* x = nullptr;
  const int64_t* t = nullptr;
};
void launch_cross_entropy(DType t, const CrossEntropyArgs& a, void* loss, void* lse, bool* correct);
// dx [N, V] of x's dtype from g_loss, g_lse and lse [N]
void launch_cross_entropy_backward(DType t, const CrossEntropyArgs& a, const void* g_loss, const void* g_lse,
                                   const void* lse, void* dx);

// ---- attention over packed qkv (ops/attention_math.h), FlashAttention-2: qkv, y, dy and dqkv of
// dtype `t`, head dim up to attn::kMaxFlashHeadDim; lse and the backward's scratch `delta` ([B, H, T])
// of acc_t (f32 for f16 / bf16) ----
void launch_attention(DType t, const attn::Geometry& g, const void* qkv, void* y, void* lse);
void launch_attention_backward(DType t, const attn::Geometry& g, const void* dy, const void* qkv, const void* y,
                               const void* lse, void* delta, void* dqkv);

// ---- fused optimizer steps over many tensors in one launch ----
// Tensor i of a launch: its lists' pointers (param, grad, state...), element count, and for Adam
// its scalars (step counts differ per tensor) or for SGD whether this is its first step.
constexpr int kFusedLists = 5;
struct FusedTensor {
  void* ptr[kFusedLists] = {};
  int64_t numel = 0;
  int32_t first = 0;
  optim_math::AdamScalars<double> adam{};
};
// The launch's blocks: block b updates elements [start, start + kFusedChunk) of tensor `tensor`.
constexpr int64_t kFusedChunk = 65536;
struct FusedChunk {
  int32_t tensor = 0;
  int64_t start = 0;
};
// tensors / chunks: device copies of the tables (n_chunks entries of chunks).
void launch_fused_sgd(DType t, const optim_math::SgdScalars<double>& s, const FusedTensor* tensors,
                      const FusedChunk* chunks, int64_t n_chunks);
void launch_fused_adam(DType t, const FusedTensor* tensors, const FusedChunk* chunks, int64_t n_chunks);

// ---- Philox random fills of a contiguous tensor of n elements (core/philox.h mapping) ----
enum class RandomOp : int32_t { Uniform, Normal, DropoutMask };
// Uniform: p0 + (p1 - p0) U; Normal: p0 + p1 N; DropoutMask: U >= p0 ? p1 : 0.
void launch_random(RandomOp op, DType t, void* out, int64_t n, uint64_t seed, uint64_t offset, double p0, double p1);

}  // namespace tr::cuda
