// CPU matrix products: f32 through ops/cpu/sgemm.h (oneDNN or OpenBLAS), f64 through OpenBLAS; bf16
// by oneDNN's matmul primitive or vdpbf16ps where that is the faster kernel (bf16_gemm_kernel),
// else f16/bf16 multiply in f32; integers by loops.
#include <cblas.h>
#include <algorithm>
#include <type_traits>
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/sgemm.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/scalar_math.h"

namespace tr::cpu {

namespace {

// A 2-D operand as BLAS sees it: pointer, transpose flag and leading dimension.
struct BlasMat {
  const void* p;
  CBLAS_TRANSPOSE trans;
  int64_t ld;
  Tensor keep;  // holds a contiguous copy when one was needed
};

BlasMat blas_view(const Tensor& m) {
  int64_t r = m.size(0), c = m.size(1);
  if (m.stride(1) == 1 && (m.stride(0) >= std::max<int64_t>(c, 1) || r == 1))
    return {m.raw_data(), CblasNoTrans, std::max<int64_t>(m.stride(0), std::max<int64_t>(c, 1)), {}};
  if (m.stride(0) == 1 && (m.stride(1) >= std::max<int64_t>(r, 1) || c == 1))
    return {m.raw_data(), CblasTrans, std::max<int64_t>(m.stride(1), std::max<int64_t>(r, 1)), {}};
  Tensor cc = m.clone();
  return {cc.raw_data(), CblasNoTrans, std::max<int64_t>(c, 1), cc};
}

// What gemm's kernel applied of the epilogue asked of it (the caller applies the rest).
struct Applied {
  bool bias = false, relu = false;
};
Applied gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias = Tensor(), bool relu = false);

// math::relu as selects: max(v, 0), NaN kept, -0 -> +0
template <typename T> inline T relu_select(T v) {
  const T r = v > T(0) ? v : T(0);
  return v != v ? v : r;
}

// relu_select in 8 lanes: v where v > 0 or v is NaN, else +0
inline __m256 relu_select8(__m256 v) { return _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ), v); }

// dst = T(src), or T(float(T(src)) + float(bias)): the product rounded, then the bias added as the
// composite add rounds it; then relu (exact on a rounded value); bf16 8 lanes at a time
template <typename T> void round_row(const float* src, const T* bias, bool relu, T* dst, int64_t n) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, BFloat16>) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    const auto* b = reinterpret_cast<const uint16_t*>(bias);
    for (; j + 8 <= n; j += 8) {
      __m256 v = _mm256_loadu_ps(src + j);
      if (b) v = _mm256_add_ps(widen_bf16x8(round_bf16x8(v)), load_bf16x8(b + j));
      if (relu) v = relu_select8(widen_bf16x8(round_bf16x8(v)));
      store_bf16x8(d + j, v);
    }
  }
  for (; j < n; ++j) {
    const T v = bias ? T(float(T(src[j])) + float(bias[j])) : T(src[j]);
    dst[j] = relu ? T(relu_select(float(v))) : v;
  }
}

// f16 / bf16 without a native kernel: sgemm on f32 copies, a block of a's rows at a time, so that
// the block's widened rows and its f32 product stay in cache while they are rounded into out (the
// whole f32 product written out and read back made gpt_char's bf16 addmm 1.4x its f32 one, held
// to AVX2). A bias is added as a row is rounded: bf16(bf16(a b) + bias), the composite's roundings,
// and addmm_relu's relu after it (a pass over out saved). A transposed operand is widened as its
// contiguous transpose (a flat 8-lane cast) and stays transposed for sgemm; a transposed a is one
// block.
template <typename T>
Applied gemm_widened(const Tensor& a, const Tensor& b, const Tensor& out, const void* pbias, bool relu) {
  auto widen = [](const Tensor& m) {
    if (!m.is_contiguous() && m.t().is_contiguous()) return cast(m.t(), DType::F32).t();
    return cast(m, DType::F32);
  };
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t rows = a.stride(1) == 1 ? std::max<int64_t>(64, (int64_t(1) << 19) / (K + N)) : M;
  const Tensor b32 = widen(b);
  const Tensor o32 = empty({std::min(rows, M), N}, DType::F32);
  const T* bias = static_cast<const T*>(pbias);
  T* po = static_cast<T*>(out.raw_data());
  for (int64_t r0 = 0; r0 < M; r0 += rows) {
    const int64_t n = std::min(rows, M - r0);
    gemm(widen(a.narrow(0, r0, n)), b32, o32.narrow(0, 0, n));
    const float* pf = static_cast<const float*>(o32.raw_data());
    parallel_for(n, std::max<int64_t>(1, 4096 / N), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) round_row(pf + i * N, bias, relu, po + (r0 + i) * N, N);
    });
  }
  return {bias != nullptr, relu};
}

// out[M,N] = a[M,K] b[K,N]; out contiguous. With `bias` ([N], contiguous, out's dtype), where the
// kernel taken is oneDNN's matmul primitive or the widened f16 / bf16 path its epilogue adds the
// bias too, and the widened path a relu after it: returns what it applied.
Applied gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, bool relu) {
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (M == 0 || N == 0) return {};
  if (K == 0) {
    out.detach().zero_();
    return {};
  }
  const void* pbias = bias.defined() && bias.is_contiguous() ? bias.raw_data() : nullptr;
  DType t = out.dtype();
  if (t == DType::F32 || t == DType::F64) {
    BlasMat A = blas_view(a), B = blas_view(b);
    // x w^T with few rows (a linear layer's forward at batch 128): oneDNN's matmul primitive ran
    // these at 1.3-1.45x its sgemm on a Zen 5 (fmnist_mlp's [128, 784] x [784, 512]^T: 342-419
    // against 266-320 GFLOP/s, caches flushed between calls); on the GPT's 4096-row products the
    // two were even or sgemm ahead
    if (t == DType::F32 && A.trans == CblasNoTrans && B.trans == CblasTrans && M <= 256 &&
        sgemm_library() == Sgemm::OneDnn &&
        onednn_matmul(t, t, M, N, K, a.raw_data(), a.stride(0), a.stride(1), b.raw_data(), b.stride(0), b.stride(1),
                      out.raw_data(), pbias))
      return {pbias != nullptr, false};
    if (t == DType::F32)
      sgemm(A.trans == CblasTrans, B.trans == CblasTrans, M, N, K, 1.0f, static_cast<const float*>(A.p), A.ld,
            static_cast<const float*>(B.p), B.ld, 0.0f, static_cast<float*>(out.raw_data()), N);
    else
      cblas_dgemm(CblasRowMajor, A.trans, B.trans, int(M), int(N), int(K), 1.0, static_cast<const double*>(A.p),
                  int(A.ld), static_cast<const double*>(B.p), int(B.ld), 0.0, static_cast<double*>(out.raw_data()),
                  int(N));
    return {};
  }
  if (t == DType::BF16 && bf16_gemm_kernel() == Bf16Gemm::OneDnn &&
      onednn_matmul(t, t, M, N, K, a.raw_data(), a.stride(0), a.stride(1), b.raw_data(), b.stride(0), b.stride(1),
                    out.raw_data(), pbias))
    return {pbias != nullptr, false};
  if (t == DType::BF16 && bf16_gemm_kernel() == Bf16Gemm::Native) {
    gemm_bf16(a, b, out);
    return {};
  }
  if (t == DType::F16) return gemm_widened<Half>(a, b, out, pbias, relu && pbias);
  if (t == DType::BF16) return gemm_widened<BFloat16>(a, b, out, pbias, relu && pbias);
  TR_DISPATCH_NUMERIC(t, "mm", [&] {
    Tensor ac = a.contiguous(), bc = b.contiguous();
    const scalar_t* pa = ac.data_ptr<scalar_t>();
    const scalar_t* pb = bc.data_ptr<scalar_t>();
    scalar_t* po = static_cast<scalar_t*>(out.raw_data());
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += int64_t(pa[i * K + k]) * int64_t(pb[k * N + j]);
        po[i * N + j] = scalar_t(s);
      }
  });
  return {};
}

void mm_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) { gemm(in[0], in[1], out[0]); }
TR_REGISTER_KERNEL(mm, CPU, mm_cpu);

// One row of addmm's epilogue in place: row = relu?(row + bias), or relu(row) where the bias is
// in already. The sum in f32 (f64, integers: their own type) rounded as the composite add rounds
// it. Selects, not branches: a relu's signs are a coin toss, and mispredicted branches ran this
// pass at 100 us for the MLP's [128, 512] (the relu op takes 4).
template <typename T> void addmm_epilogue_row(T* row, const T* bias, int64_t n, bool relu) {
  using acc_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  if (bias == nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = T(relu_select(acc_t(row[j])));
  } else if (relu) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = T(relu_select(acc_t(T(acc_t(row[j]) + acc_t(bias[j])))));
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] = T(acc_t(row[j]) + acc_t(bias[j]));
  }
}

// addmm and addmm_relu: bias + a b (then relu): gemm, with the bias in oneDNN's epilogue where
// oneDNN runs the product, else in our pass.
void addmm_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&, bool relu) {
  const Tensor& o = out[0];
  const Applied done = gemm(in[1], in[2], o, in[0], relu);
  const bool biased = done.bias;
  if (biased && done.relu == relu) return;
  const Tensor bias = in[0].contiguous();
  const int64_t M = o.size(0), N = o.size(1);
  TR_DISPATCH_NUMERIC(o.dtype(), "addmm", [&] {
    scalar_t* po = static_cast<scalar_t*>(o.raw_data());
    const scalar_t* pb = biased ? nullptr : bias.data_ptr<scalar_t>();
    parallel_for(M, std::max<int64_t>(1, 4096 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) addmm_epilogue_row(po + r * N, pb, N, relu);
    });
  });
}
void addmm_plain_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  addmm_cpu(in, out, a, false);
}
void addmm_relu_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  addmm_cpu(in, out, a, true);
}
TR_REGISTER_KERNEL(addmm, CPU, addmm_plain_cpu);
TR_REGISTER_KERNEL(addmm_relu, CPU, addmm_relu_cpu);

// addmm_backward_weight_bias: gw = g^T a by the gemm mm runs, gb = the column sums of g by sum's
// kernel, so that it equals the composite's mm and sum_to bit for bit.
void addmm_backward_weight_bias_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  gemm(in[0].t(), in[1], out[0]);
  std::vector<Tensor> gb{out[1]};
  def_op("sum").kernels[int(DeviceType::CPU)]({in[0]}, gb, Attrs{{"dims", std::vector<int64_t>{0}}});
}
TR_REGISTER_KERNEL(addmm_backward_weight_bias, CPU, addmm_backward_weight_bias_cpu);

void bmm_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  int64_t B = in[0].size(0);
  // detached: worker threads start in grad mode, and these per-batch views need no history
  Tensor a = in[0].detach(), b = in[1].detach(), o = out[0];
  int64_t work = a.size(1) * a.size(2) * b.size(2);
  // Small matrices: one BLAS call per thread, batches split across the pool. Large: BLAS threads.
  if (B > 1 && work < (1 << 21)) {
    parallel_for(B, 1, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) gemm(a.select(0, i), b.select(0, i), o.select(0, i));
    });
  } else {
    for (int64_t i = 0; i < B; ++i) gemm(a.select(0, i), b.select(0, i), o.select(0, i));
  }
}
TR_REGISTER_KERNEL(bmm, CPU, bmm_cpu);

}  // namespace
}  // namespace tr::cpu
