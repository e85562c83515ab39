// The emulated cuDNN: descriptors hold what they were set to, and each convolution is queued on
// the handle's stream and computed there in double, as GEMMs over the im2col matrix of each image
// and group (OpenBLAS's dgemm; a convolution was 40% of an emulated CNN's time as direct loops):
//   col[(c R + r) S + s, p Q + q] = x[n, g Cg + c, p u - ph + r dh, q v - pw + s dw]  (0 outside x)
//   forward:         y[n, g]  = alpha W[g] col + beta y             (W[g]: Kg x Cg R S)
//   backward data:   dx[n, g] = alpha col2im(W[g]^T dy[n, g]) + beta dx  (col2im: the adjoint of im2col)
//   backward filter: dW[g]    = alpha S_n dy[n, g] col^T + beta dW
// with Cg = C / groups, Kg = K / groups; beta = 0 does not read the output.
#include <cblas.h>
#include <cudnn.h>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>
#include "half_convert.h"
#include "runtime_internal.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
  int device = 0;
};
struct cudnnTensorStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct cudnnFilterStruct {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct cudnnConvolutionStruct {
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1, groups = 1;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  bool set = false;
};

namespace {

using namespace cuda_emu;

// Workspace the non-deterministic algorithm 1 asks for (so that callers' workspaces are exercised).
constexpr size_t kAlgo1Workspace = 1 << 16;

struct Geom {
  int N, C, H, W, K, R, S, P, Q, ph, pw, u, v, dh, dw, G;
  int Cg() const { return C / G; }
  int Kg() const { return K / G; }
  int ck() const { return Cg() * R * S; }  // rows of an im2col matrix (columns of W[g])
  int pq() const { return P * Q; }         // its columns
};

cudnnStatus_t geometry(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                       cudnnTensorDescriptor_t y, Geom& g) {
  if (!x || !w || !c || !y || !x->set || !w->set || !c->set || !y->set) return CUDNN_STATUS_BAD_PARAM;
  if (x->type != w->type || x->type != y->type) return CUDNN_STATUS_BAD_PARAM;
  g = {x->n, x->c,     x->h,     x->w, w->k, w->h,     w->w,     y->h,
       y->w, c->pad_h, c->pad_w, c->u, c->v, c->dil_h, c->dil_w, c->groups};
  if (g.G < 1 || g.C % g.G || g.K % g.G || w->c * g.G != g.C || y->c != g.K || y->n != g.N)
    return CUDNN_STATUS_BAD_PARAM;
  const int p = (g.H + 2 * g.ph - g.dh * (g.R - 1) - 1) / g.u + 1,
            q = (g.W + 2 * g.pw - g.dw * (g.S - 1) - 1) / g.v + 1;
  if (p != g.P || q != g.Q) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

double load(const void* p, cudnnDataType_t t, size_t i) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return static_cast<const float*>(p)[i];
    case CUDNN_DATA_DOUBLE: return static_cast<const double*>(p)[i];
    case CUDNN_DATA_HALF: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case CUDNN_DATA_BFLOAT16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}
void store(void* p, cudnnDataType_t t, size_t i, double v) {
  switch (t) {
    case CUDNN_DATA_FLOAT: static_cast<float*>(p)[i] = float(v); break;
    case CUDNN_DATA_DOUBLE: static_cast<double*>(p)[i] = v; break;
    case CUDNN_DATA_HALF: static_cast<uint16_t*>(p)[i] = float_to_half(float(v)); break;
    case CUDNN_DATA_BFLOAT16: static_cast<uint16_t*>(p)[i] = float_to_bf16(float(v)); break;
  }
}
// alpha / beta: double for f64 data, float otherwise (cuDNN's rule)
double scale(const void* p, cudnnDataType_t t) {
  return t == CUDNN_DATA_DOUBLE ? *static_cast<const double*>(p) : double(*static_cast<const float*>(p));
}

// Input column of output column 0 for tap column s, and the output columns [q0, q1) whose input
// column q v + w0 falls inside [0, W) (empty when q1 <= q0).
struct TapColumns {
  int w0, q0, q1;
};
TapColumns tap_columns(const Geom& g, int s) {
  const int w0 = s * g.dw - g.pw;
  const int q0 = w0 >= 0 ? 0 : (-w0 + g.v - 1) / g.v;
  const int q1 = g.W - 1 - w0 < 0 ? 0 : std::min(g.Q, (g.W - 1 - w0) / g.v + 1);
  return {w0, q0, q1};
}

// f(row, plane_row, p, t) for every row (c R + r) S + s of the im2col matrix of one image's group
// (x: its Cg planes) and output row p whose input row h is inside x (plane_row: the offset of
// row h of plane c); columns [t.q0, t.q1) of that row read input columns q v + t.w0, the others are 0.
template <typename F> void for_each_col_row(const Geom& g, const F& f) {
  for (int c = 0; c < g.Cg(); ++c)
    for (int r = 0; r < g.R; ++r)
      for (int s = 0; s < g.S; ++s) {
        const TapColumns t = tap_columns(g, s);
        if (t.q1 <= t.q0) continue;
        const int row = (c * g.R + r) * g.S + s;
        for (int p = 0; p < g.P; ++p) {
          const int h = p * g.u - g.ph + r * g.dh;
          if (h >= 0 && h < g.H) f(row, size_t(c) * g.H * g.W + size_t(h) * g.W, p, t);
        }
      }
}
// col = im2col(x), x the Cg planes of one image's group
void im2col(const Geom& g, const double* x, double* col) {
  const size_t pq = size_t(g.pq());
  std::fill(col, col + size_t(g.ck()) * pq, 0.0);
  for_each_col_row(g, [&](int row, size_t plane_row, int p, const TapColumns& t) {
    double* out = col + row * pq + size_t(p) * g.Q;
    const double* in = x + plane_row + t.w0;
    for (int q = t.q0; q < t.q1; ++q) out[q] = in[size_t(q) * g.v];
  });
}
// dx += col2im(col), dx the Cg planes of one image's group
void col2im_add(const Geom& g, const double* col, double* dx) {
  const size_t pq = size_t(g.pq());
  for_each_col_row(g, [&](int row, size_t plane_row, int p, const TapColumns& t) {
    const double* in = col + row * pq + size_t(p) * g.Q;
    double* out = dx + plane_row + t.w0;
    for (int q = t.q0; q < t.q1; ++q) out[size_t(q) * g.v] += in[q];
  });
}

std::vector<double> to_doubles(const void* p, cudnnDataType_t t, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = load(p, t, i);
  return v;
}
size_t xi(const Geom& g, int n, int c, int h, int w) { return ((size_t(n) * g.C + c) * g.H + h) * g.W + w; }
size_t yi(const Geom& g, int n, int k, int p, int q) { return ((size_t(n) * g.K + k) * g.P + p) * g.Q + q; }

// out = alpha acc + beta out over `count` elements
void blend(void* out, cudnnDataType_t t, const std::vector<double>& acc, double alpha, double beta) {
  for (size_t i = 0; i < acc.size(); ++i) store(out, t, i, alpha * acc[i] + (beta == 0 ? 0.0 : beta * load(out, t, i)));
}

template <typename Perf, typename Algo> void offer(int requested, int* returned, Perf* perf) {
  // algorithm 1 (faster, non-deterministic, needs a workspace) first, then 0
  const Perf all[2] = {
      {Algo(1), CUDNN_STATUS_SUCCESS, 0.5f, kAlgo1Workspace, CUDNN_NON_DETERMINISTIC, CUDNN_DEFAULT_MATH, {}},
      {Algo(0), CUDNN_STATUS_SUCCESS, 1.0f, 0, CUDNN_DETERMINISTIC, CUDNN_DEFAULT_MATH, {}}};
  *returned = std::min(requested, 2);
  for (int i = 0; i < *returned; ++i) perf[i] = all[i];
}

cudnnStatus_t workspace_of(int algo, size_t* bytes) {
  if (algo != 0 && algo != 1) return CUDNN_STATUS_NOT_SUPPORTED;
  *bytes = algo == 1 ? kAlgo1Workspace : 0;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_workspace(int algo, const void* ws, size_t ws_bytes) {
  size_t need = 0;
  if (cudnnStatus_t s = workspace_of(algo, &need); s != CUDNN_STATUS_SUCCESS) return s;
  if (ws_bytes < need || (need && !ws)) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

size_t cudnnGetVersion() { return CUDNN_VERSION; }
const char* cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_INTERNAL_ERROR";
  }
}
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  const int dev = handle_device();
  if (dev < 0) return CUDNN_STATUS_NOT_INITIALIZED;
  *h = new cudnnContext;
  (*h)->device = dev;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  *d = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w) {
  if (f != CUDNN_TENSOR_NCHW || n <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = {t, n, c, h, w, true};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  *d = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w) {
  if (f != CUDNN_TENSOR_NCHW || k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = {t, k, c, h, w, true};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  *d = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0 ||
      mode != CUDNN_CROSS_CORRELATION)
    return CUDNN_STATUS_BAD_PARAM;
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->u = u;
  d->v = v;
  d->dil_h = dilation_h;
  d->dil_w = dilation_w;
  d->compute = compute;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (groups < 1) return CUDNN_STATUS_BAD_PARAM;
  d->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
  d->math = m;  // the emulator computes in double whatever the math type
  return CUDNN_STATUS_SUCCESS;
}

// ---- forward ----

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                                     cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  Geom g;
  if (cudnnStatus_t s = geometry(x, w, c, y, g); s != CUDNN_STATUS_SUCCESS) return s;
  offer<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(requested, returned, perf);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, cudnnTensorDescriptor_t x, const void*,
                                                     cudnnFilterDescriptor_t w, const void*,
                                                     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, void*,
                                                     int requested, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf,
                                                     void*, size_t) {
  return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                                                      cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                      cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
  return workspace_of(int(a), bytes);
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x, const void* xp,
                                      cudnnFilterDescriptor_t w, const void* wp, cudnnConvolutionDescriptor_t c,
                                      cudnnConvolutionFwdAlgo_t a, void* ws, size_t ws_bytes, const void* beta,
                                      cudnnTensorDescriptor_t y, void* yp) {
  Geom g;
  if (cudnnStatus_t s = geometry(x, w, c, y, g); s != CUDNN_STATUS_SUCCESS) return s;
  if (cudnnStatus_t s = check_workspace(int(a), ws, ws_bytes); s != CUDNN_STATUS_SUCCESS) return s;
  if (!all_on_device(h->device, {xp, wp, yp})) return CUDNN_STATUS_BAD_PARAM;
  const cudnnDataType_t t = x->type;
  const double al = scale(alpha, t), be = scale(beta, t);
  count(Counter::Kernel);
  enqueue(stream_of(h->stream), [=] {
    const std::vector<double> x = to_doubles(xp, t, size_t(g.N) * g.C * g.H * g.W),
                              w = to_doubles(wp, t, size_t(g.K) * g.Cg() * g.R * g.S);
    std::vector<double> acc(size_t(g.N) * g.K * g.P * g.Q), col(size_t(g.ck()) * g.pq());
    const int ck = g.ck(), pq = g.pq();
    for (int n = 0; n < g.N; ++n)
      for (int grp = 0; grp < g.G; ++grp) {
        im2col(g, &x[xi(g, n, grp * g.Cg(), 0, 0)], col.data());
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.Kg(), pq, ck, 1.0, &w[size_t(grp) * g.Kg() * ck], ck,
                    col.data(), pq, 0.0, &acc[yi(g, n, grp * g.Kg(), 0, 0)], pq);
      }
    blend(yp, t, acc, al, be);
    return true;
  });
  return CUDNN_STATUS_SUCCESS;
}

// ---- backward data ----

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                          cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                          cudnnTensorDescriptor_t dx, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  Geom g;
  if (cudnnStatus_t s = geometry(dx, w, c, dy, g); s != CUDNN_STATUS_SUCCESS) return s;
  offer<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(requested, returned, perf);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t h, cudnnFilterDescriptor_t w, const void*,
                                                          cudnnTensorDescriptor_t dy, const void*,
                                                          cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx,
                                                          void*, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf, void*, size_t) {
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, dy, c, dx, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, cudnnFilterDescriptor_t,
                                                           cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                           cudnnTensorDescriptor_t, cudnnConvolutionBwdDataAlgo_t a,
                                                           size_t* bytes) {
  return workspace_of(int(a), bytes);
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha, cudnnFilterDescriptor_t w,
                                           const void* wp, cudnnTensorDescriptor_t dy, const void* dyp,
                                           cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t a, void* ws,
                                           size_t ws_bytes, const void* beta, cudnnTensorDescriptor_t dx, void* dxp) {
  Geom g;
  if (cudnnStatus_t s = geometry(dx, w, c, dy, g); s != CUDNN_STATUS_SUCCESS) return s;
  if (cudnnStatus_t s = check_workspace(int(a), ws, ws_bytes); s != CUDNN_STATUS_SUCCESS) return s;
  if (!all_on_device(h->device, {wp, dyp, dxp})) return CUDNN_STATUS_BAD_PARAM;
  const cudnnDataType_t t = dx->type;
  const double al = scale(alpha, t), be = scale(beta, t);
  count(Counter::Kernel);
  enqueue(stream_of(h->stream), [=] {
    const std::vector<double> dy = to_doubles(dyp, t, size_t(g.N) * g.K * g.P * g.Q),
                              w = to_doubles(wp, t, size_t(g.K) * g.Cg() * g.R * g.S);
    std::vector<double> acc(size_t(g.N) * g.C * g.H * g.W, 0.0), col(size_t(g.ck()) * g.pq());
    const int ck = g.ck(), pq = g.pq();
    for (int n = 0; n < g.N; ++n)
      for (int grp = 0; grp < g.G; ++grp) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ck, pq, g.Kg(), 1.0, &w[size_t(grp) * g.Kg() * ck], ck,
                    &dy[yi(g, n, grp * g.Kg(), 0, 0)], pq, 0.0, col.data(), pq);
        col2im_add(g, col.data(), &acc[xi(g, n, grp * g.Cg(), 0, 0)]);
      }
    blend(dxp, t, acc, al, be);
    return true;
  });
  return CUDNN_STATUS_SUCCESS;
}

// ---- backward filter ----

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                            cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                            cudnnFilterDescriptor_t dw, int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  Geom g;
  if (cudnnStatus_t s = geometry(x, dw, c, dy, g); s != CUDNN_STATUS_SUCCESS) return s;
  offer<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(requested, returned, perf);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t h, cudnnTensorDescriptor_t x, const void*,
                                                            cudnnTensorDescriptor_t dy, const void*,
                                                            cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw,
                                                            void*, int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void*, size_t) {
  return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, dy, c, dw, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t,
                                                             cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                             cudnnFilterDescriptor_t, cudnnConvolutionBwdFilterAlgo_t a,
                                                             size_t* bytes) {
  return workspace_of(int(a), bytes);
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x,
                                             const void* xp, cudnnTensorDescriptor_t dy, const void* dyp,
                                             cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t a,
                                             void* ws, size_t ws_bytes, const void* beta, cudnnFilterDescriptor_t dw,
                                             void* dwp) {
  Geom g;
  if (cudnnStatus_t s = geometry(x, dw, c, dy, g); s != CUDNN_STATUS_SUCCESS) return s;
  if (cudnnStatus_t s = check_workspace(int(a), ws, ws_bytes); s != CUDNN_STATUS_SUCCESS) return s;
  if (!all_on_device(h->device, {xp, dyp, dwp})) return CUDNN_STATUS_BAD_PARAM;
  const cudnnDataType_t t = x->type;
  const double al = scale(alpha, t), be = scale(beta, t);
  count(Counter::Kernel);
  enqueue(stream_of(h->stream), [=] {
    const std::vector<double> dy = to_doubles(dyp, t, size_t(g.N) * g.K * g.P * g.Q),
                              x = to_doubles(xp, t, size_t(g.N) * g.C * g.H * g.W);
    std::vector<double> acc(size_t(g.K) * g.Cg() * g.R * g.S, 0.0), col(size_t(g.ck()) * g.pq());
    const int ck = g.ck(), pq = g.pq();
    for (int n = 0; n < g.N; ++n)
      for (int grp = 0; grp < g.G; ++grp) {
        im2col(g, &x[xi(g, n, grp * g.Cg(), 0, 0)], col.data());
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.Kg(), ck, pq, 1.0, &dy[yi(g, n, grp * g.Kg(), 0, 0)], pq,
                    col.data(), pq, 1.0, &acc[size_t(grp) * g.Kg() * ck], ck);
      }
    blend(dwp, t, acc, al, be);
    return true;
  });
  return CUDNN_STATUS_SUCCESS;
}

// ---- C = alpha A + beta C, A broadcast over the dims where it has size 1 ----

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t a, const void* ap,
                             const void* beta, cudnnTensorDescriptor_t c, void* cp) {
  if (!a || !c || !a->set || !c->set || a->type != c->type) return CUDNN_STATUS_BAD_PARAM;
  const int ad[4] = {a->n, a->c, a->h, a->w}, cd[4] = {c->n, c->c, c->h, c->w};
  for (int i = 0; i < 4; ++i)
    if (ad[i] != cd[i] && ad[i] != 1) return CUDNN_STATUS_BAD_PARAM;
  if (!all_on_device(h->device, {ap, cp})) return CUDNN_STATUS_BAD_PARAM;
  const cudnnDataType_t t = c->type;
  const double al = scale(alpha, t), be = scale(beta, t);
  const cudnnTensorStruct A = *a, Cd = *c;
  count(Counter::Kernel);
  enqueue(stream_of(h->stream), [=] {
    for (int n = 0; n < Cd.n; ++n)
      for (int ch = 0; ch < Cd.c; ++ch)
        for (int y = 0; y < Cd.h; ++y)
          for (int x = 0; x < Cd.w; ++x) {
            const size_t ci = ((size_t(n) * Cd.c + ch) * Cd.h + y) * Cd.w + x;
            const size_t ai =
                ((size_t(A.n == 1 ? 0 : n) * A.c + (A.c == 1 ? 0 : ch)) * A.h + (A.h == 1 ? 0 : y)) * A.w +
                (A.w == 1 ? 0 : x);
            store(cp, t, ci, al * load(ap, t, ai) + (be == 0 ? 0.0 : be * load(cp, t, ci)));
          }
    return true;
  });
  return CUDNN_STATUS_SUCCESS;
}
