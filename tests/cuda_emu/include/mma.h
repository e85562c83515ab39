// mma.h as the CUDA emulator provides it (tests/cuda_emu): nvcuda::wmma's warp-level matrix
// products over fragments. A fragment here is the whole tile, held by every lane of the warp (the
// hardware spreads it over the lanes in an unspecified layout): exact for code that touches
// fragments only through these functions and element-wise through x[i], i < num_elements, which
// is all the API promises. Every lane computes the whole product, so the collective calls need no
// exchange between lanes. Layouts and strides as CUDA's documentation states them: a row-major
// matrix_a element (m, k) is at p[m ldm + k], a column-major one at p[m + k ldm]; matrix_b's (k, n)
// at p[k ldm + n] or p[k + n ldm]; an accumulator's (m, n) at p[m ldm + n] (mem_row_major) or
// p[m + n ldm] (mem_col_major). mma_sync accumulates in float, k in order (the hardware's order
// within a fragment is unspecified; its products of 16-bit inputs are exact in f32 either way).
#pragma once
#include <type_traits>
#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
// rows x cols of the tile a fragment holds
template <typename Use, int M, int N, int K> struct Shape;
template <int M, int N, int K> struct Shape<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct Shape<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct Shape<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };
}  // namespace detail

// x[r cols + c] is element (r, c) of the tile.
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
  static constexpr int rows = detail::Shape<Use, M, N, K>::rows, cols = detail::Shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const T& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

// matrix_a / matrix_b: the fragment's layout says how p is laid out
template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "load_matrix_sync: a matrix_a / matrix_b fragment needs row_major or col_major");
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.x[r * F::cols + c] = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[r + c * ldm];
}

// accumulators: the layout is the call's
template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) f.x[r * N + c] = layout == mem_row_major ? p[r * ldm + c] : p[r + c * ldm];
}
template <int M, int N, int K, typename T>
void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) (layout == mem_row_major ? p[r * ldm + c] : p[r + c * ldm]) = f.x[r * N + c];
}

// d = a b + c (d may be c)
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  TC out[M * N];
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float s = float(c.x[m * N + n]);
      for (int k = 0; k < K; ++k) s += float(a.x[m * K + k]) * float(b.x[k * N + n]);
      out[m * N + n] = TC(s);
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma
