// CPU reduction kernels. The input is brought into [outer, inner] row layout (kept dims first,
// reduced dims last); reductions over leading dims of a contiguous tensor run column-wise.
#include <cmath>
#include <cstring>
#include <limits>
#include "ops/cpu/loops.h"
#include "ops/cpu/vec4.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

struct Rows {
  Tensor t;           // contiguous [outer, inner]
  int64_t outer = 1;  // number of output elements
  int64_t inner = 1;  // elements reduced into each
};

Rows to_rows(const Tensor& x, const Shape& dims) {
  Shape perm, kept;
  int64_t inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) perm.push_back(i);
  for (auto d : dims) {
    perm.push_back(d);
    inner *= x.size(d);
  }
  Tensor p = x.dim() ? x.detach().permute(perm).contiguous() : x.detach().contiguous();
  return {p, inner ? x.numel() / inner : 0, inner};
}

// True when dims are exactly the leading dims of a contiguous tensor: reduce column-wise.
bool leading_dims(const Tensor& x, const Shape& dims) {
  if (!x.is_contiguous() || dims.empty() || dims.size() == size_t(x.dim())) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != int64_t(i)) return false;
  return true;
}

// [A, K, B] view of a contiguous tensor whose kept dims are one run [k0, k1) between reduced
// leading dims [0, k0) and reduced trailing dims [k1, ndim), both non-empty (NCHW summed over
// N, H, W: A = N, K = C, B = H W). Such sums need no permuted copy.
bool middle_kept(const Tensor& x, const Shape& dims, int64_t& A, int64_t& K, int64_t& B) {
  const int64_t nd = x.dim();
  if (!x.is_contiguous() || dims.empty() || int64_t(dims.size()) >= nd) return false;
  int64_t k0 = 0;
  while (k0 < int64_t(dims.size()) && dims[size_t(k0)] == k0) ++k0;
  const int64_t k1 = nd - (int64_t(dims.size()) - k0);  // the remaining dims must be k1 .. nd-1
  if (k0 == 0 || k1 >= nd || k1 <= k0) return false;
  for (int64_t i = k0; i < int64_t(dims.size()); ++i)
    if (dims[size_t(i)] != k1 + (i - k0)) return false;
  A = K = B = 1;
  for (int64_t d = 0; d < nd; ++d) (d < k0 ? A : d < k1 ? K : B) *= x.size(d);
  return true;
}

// Sum of a contiguous run: f32 in 32 vector lanes per 4096-element block, blocks combined in
// double (fast, and more accurate than one running sum); other types in their accumulator.
template <typename T, typename Acc> Acc sum_contiguous(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    double total = 0;
    for (int64_t b = 0; b < n; b += 4096) {
      const int64_t e = std::min(n, b + 4096);
      float lanes[32] = {0};
      int64_t i = b;
      for (; i + 32 <= e; i += 32) {
#pragma omp simd
        for (int j = 0; j < 32; ++j) lanes[j] += p[i + j];
      }
      double block = 0;
      for (int j = 0; j < 32; ++j) block += double(lanes[j]);
      for (; i < e; ++i) block += double(p[i]);
      total += block;
    }
    return Acc(total);
  } else if constexpr (std::is_same_v<T, double>) {
    double lanes[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
#pragma omp simd
      for (int j = 0; j < 8; ++j) lanes[j] += p[i + j];
    }
    double total = 0;
    for (int j = 0; j < 8; ++j) total += lanes[j];
    for (; i < n; ++i) total += p[i];
    return Acc(total);
  } else {
    Acc s = 0;
    for (int64_t k = 0; k < n; ++k) s += Acc(acc_t<T>(p[k]));
    return s;
  }
}

// out[c] = sum_r x[r, c] for f32 or bf16 x (a bias gradient: [B, T, C] summed to [C]): each column
// added row by row in double, as the generic loop below. False (nothing done) for other types.
template <typename In, typename O> bool sum_columns(const In* p, int64_t rows, int64_t cols, O* o) {
  if constexpr (!std::is_same_v<In, float> && !std::is_same_v<In, BFloat16>) {
    return false;
  } else {
    // A thread owns a run of whole 4-column groups and sweeps the rows top to bottom, reading long
    // contiguous pieces of each row; its accumulators live in L1, each loaded once per 4 rows and
    // the 4 values added in row order (the same order as one row at a time: the same bits).
    const int64_t groups = cols / 4;
    parallel_runs(groups, kGrain / std::max<int64_t>(4 * rows, 1), [&](int64_t g0, int64_t g1) {
      std::vector<d4> acc(size_t(g1 - g0), d4{0, 0, 0, 0});
      int64_t r = 0;
      for (; r + 4 <= rows; r += 4) {
        const In* q = p + r * cols + 4 * g0;
        for (int64_t k = 0; k < g1 - g0; ++k, q += 4) {
          d4 a = acc[size_t(k)];
          a += load4_as_double(q);
          a += load4_as_double(q + cols);
          a += load4_as_double(q + 2 * cols);
          a += load4_as_double(q + 3 * cols);
          acc[size_t(k)] = a;
        }
      }
      for (; r < rows; ++r)
        for (int64_t k = 0; k < g1 - g0; ++k) acc[size_t(k)] += load4_as_double(p + r * cols + 4 * (g0 + k));
      for (int64_t k = 0; k < g1 - g0; ++k)
        for (int j = 0; j < 4; ++j) o[4 * (g0 + k) + j] = convert<O>(acc[size_t(k)][j]);
    });
    // the last cols % 4 columns
    for (int64_t c = groups * 4; c < cols; ++c) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += double(float(p[r * cols + c]));
      o[c] = convert<O>(s);
    }
    return true;
  }
}

template <typename T> using sum_acc_t =
    std::conditional_t<std::is_floating_point_v<acc_t<T>> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>,
                       double, int64_t>;

void sum_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor& x = in[0];
  const Shape& dims = a.ints("dims");
  TR_DISPATCH_ALL(x.dtype(), "sum", [&] {
    using In = scalar_t;
    using A = acc_t<In>;
    using Acc = sum_acc_t<In>;
    int64_t n = x.numel();
    if (leading_dims(x, dims)) {
      int64_t rows = 1;
      for (auto d : dims) rows *= x.size(d);
      int64_t cols = n / std::max<int64_t>(rows, 1);
      const In* p = x.data_ptr<In>();
      TR_DISPATCH_ALL(out[0].dtype(), "sum", [&] {
        using O = scalar_t;
        O* o = out[0].data_ptr<O>();
        if (sum_columns(p, rows, cols, o)) return;
        parallel_for(cols, std::max<int64_t>(1, kGrain / std::max<int64_t>(rows, 1)), [&](int64_t b, int64_t e) {
          std::vector<Acc> acc(size_t(e - b), Acc(0));
          for (int64_t r = 0; r < rows; ++r) {
            const auto* row = p + r * cols;
            for (int64_t c = b; c < e; ++c) acc[c - b] += Acc(A(row[c]));
          }
          for (int64_t c = b; c < e; ++c) o[c] = convert<O>(acc[c - b]);
        });
      });
      return;
    }
    int64_t A_ = 1, K_ = 1, B_ = 1;
    if (middle_kept(x, dims, A_, K_, B_)) {
      // out[k] = sum_a sum_b x[a, k, b]: runs of B, added in a fixed order per k. A thread owns a
      // block of k and sweeps it a by a, so its reads stream through memory (k by k would jump
      // a whole [K, B] slab between short runs, each starting with cold prefetchers).
      const In* p = x.data_ptr<In>();
      TR_DISPATCH_ALL(out[0].dtype(), "sum", [&] {
        using O = scalar_t;
        O* o = out[0].data_ptr<O>();
        parallel_for(K_, std::max<int64_t>(1, kGrain / std::max<int64_t>(A_ * B_, 1)), [&](int64_t b, int64_t e) {
          std::vector<Acc> s(size_t(e - b), Acc(0));
          for (int64_t i = 0; i < A_; ++i)
            for (int64_t k = b; k < e; ++k) s[size_t(k - b)] += sum_contiguous<In, Acc>(p + (i * K_ + k) * B_, B_);
          for (int64_t k = b; k < e; ++k) o[k] = convert<O>(s[size_t(k - b)]);
        });
      });
      return;
    }
    Rows r = to_rows(x, dims);
    const In* p = r.t.data_ptr<In>();
    int64_t inner = r.inner, outer = out[0].numel();
    TR_DISPATCH_ALL(out[0].dtype(), "sum", [&] {
      using O = scalar_t;
      O* o = out[0].data_ptr<O>();
      auto body = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) { o[i] = convert<O>(sum_contiguous<In, Acc>(p + i * inner, inner)); }
      };
      if (outer == 1 && inner >= kGrain) {
        // one long row: partial sums of pieces whose count depends on the length only (so the
        // result does not depend on the thread count), combined in order
        const int64_t parts = std::min<int64_t>(64, (inner + kGrain - 1) / kGrain);
        std::vector<Acc> part(size_t(parts), Acc(0));
        parallel_for(parts, 1, [&](int64_t b, int64_t e) {
          for (int64_t q = b; q < e; ++q) {
            const int64_t lo = inner * q / parts, hi = inner * (q + 1) / parts;
            part[size_t(q)] = sum_contiguous<In, Acc>(p + lo, hi - lo);
          }
        });
        Acc s = 0;
        for (auto v : part) s += v;
        o[0] = convert<O>(s);
      } else {
        parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), body);
      }
    });
  });
}
TR_REGISTER_KERNEL(sum, CPU, sum_cpu);

// Extremum over rows: values (and optionally the first index attaining it); NaN wins.
template <bool IsMax> void extremum_rows(const Tensor& x, const Shape& dims, Tensor* values, Tensor* indices) {
  Rows r = to_rows(x, dims);
  TR_DISPATCH_ALL(x.dtype(), "max", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* p = r.t.data_ptr<scalar_t>();
    int64_t inner = r.inner, outer = values ? values->numel() : indices->numel();
    scalar_t* vo = values ? values->data_ptr<scalar_t>() : nullptr;
    int64_t* io = indices ? indices->data_ptr<int64_t>() : nullptr;
    parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const scalar_t* row = p + i * inner;
        A best = A(row[0]);
        int64_t bi = 0;
        for (int64_t k = 1; k < inner; ++k) {
          A v = A(row[k]);
          if (best != best) break;  // NaN already selected
          if (v != v || (IsMax ? v > best : v < best)) {
            best = v;
            bi = k;
          }
        }
        if (vo) vo[i] = scalar_t(best);
        if (io) io[i] = bi;
      }
    });
  });
}

void amax_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<true>(in[0], a.ints("dims"), &out[0], nullptr);
}
void amin_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<false>(in[0], a.ints("dims"), &out[0], nullptr);
}
void max_dim_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<true>(in[0], a.ints("dims"), &out[0], &out[1]);
}
void min_dim_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<false>(in[0], a.ints("dims"), &out[0], &out[1]);
}
void argmax_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<true>(in[0], a.ints("dims"), nullptr, &out[0]);
}
void argmin_cpu(const Ins& in, Outs& out, const Attrs& a) {
  extremum_rows<false>(in[0], a.ints("dims"), nullptr, &out[0]);
}
TR_REGISTER_KERNEL(amax, CPU, amax_cpu);
TR_REGISTER_KERNEL(amin, CPU, amin_cpu);
TR_REGISTER_KERNEL(max_dim, CPU, max_dim_cpu);
TR_REGISTER_KERNEL(min_dim, CPU, min_dim_cpu);
TR_REGISTER_KERNEL(argmax, CPU, argmax_cpu);
TR_REGISTER_KERNEL(argmin, CPU, argmin_cpu);

// var = sum((x - mean)^2) / max(0, N - correction), two passes in double per row.
void var_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Rows r = to_rows(in[0], a.ints("dims"));
  double corr = a.f("correction");
  TR_DISPATCH_FLOAT(in[0].dtype(), "var", [&] {
    const scalar_t* p = r.t.data_ptr<scalar_t>();
    scalar_t* o = out[0].data_ptr<scalar_t>();
    int64_t inner = r.inner, outer = out[0].numel();
    parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const scalar_t* row = p + i * inner;
        double m = 0;
        for (int64_t k = 0; k < inner; ++k) m += double(acc_t<scalar_t>(row[k]));
        m /= double(inner);
        double s = 0;
        for (int64_t k = 0; k < inner; ++k) {
          double d = double(acc_t<scalar_t>(row[k])) - m;
          s += d * d;
        }
        double denom = std::max(0.0, double(inner) - corr);
        o[i] = scalar_t(acc_t<scalar_t>(s / denom));
      }
    });
  });
}
TR_REGISTER_KERNEL(var, CPU, var_cpu);

}  // namespace
}  // namespace tr::cpu
