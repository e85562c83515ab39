// Window math of max_pool2d and avg_pool2d, compiled for host and device: the CPU kernels
// (ops/cpu/pool.cpp) and the CUDA kernels (ops/cuda/pool_kernels.cu) call these same functions.
// Geometry: x [N, C, H, W] -> y [N, C, OH, OW]; window (oh, ow) has taps
// (oh SH - PH + i DH, ow SW - PW + j DW) for i < KH, j < KW; taps outside the plane are padding.
#pragma once
#include <cstdint>
#include "core/macros.h"

namespace tr::pool {

struct Geom {
  int64_t planes, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH = 1, DW = 1;
};

template <typename T> TR_HD bool is_nan(T v) { return v != v; }

// y = max over the taps of window (oh, ow) of the values v(i) at the plane's flat positions i
// (padding is -inf); *arg = ih W + iw of the first maximum, a NaN replacing any number (torch's
// rule). A window with no tap inside the plane gives -inf at the first tap's clamped position (0).
template <typename A, typename V>
TR_HD A max_window_of(const V& v, const Geom& g, int64_t oh, int64_t ow, int64_t* arg) {
  const int64_t h0 = oh * g.SH - g.PH, w0 = ow * g.SW - g.PW;
  const int64_t i0 = h0 >= 0 ? 0 : (-h0 + g.DH - 1) / g.DH;  // first tap inside the plane
  const int64_t j0 = w0 >= 0 ? 0 : (-w0 + g.DW - 1) / g.DW;
  const int64_t ih0 = h0 + i0 * g.DH, iw0 = w0 + j0 * g.DW;
  A best = -A(1) / A(0);
  int64_t a = (i0 < g.KH && ih0 < g.H && j0 < g.KW && iw0 < g.W) ? ih0 * g.W + iw0 : 0;
  for (int64_t i = i0; i < g.KH; ++i) {
    const int64_t ih = h0 + i * g.DH;
    if (ih >= g.H) break;
    for (int64_t j = j0; j < g.KW; ++j) {
      const int64_t iw = w0 + j * g.DW;
      if (iw >= g.W) break;
      const A x = v(ih * g.W + iw);
      if (x > best || is_nan(x)) {
        best = x;
        a = ih * g.W + iw;
      }
    }
  }
  *arg = a;
  return best;
}

// The plane xp's values, as max_window_of reads them.
template <typename A, typename T> struct PlaneValues {
  const T* xp;
  TR_HD A operator()(int64_t i) const { return A(xp[i]); }
};
template <typename A, typename T> TR_HD A max_window(const T* xp, const Geom& g, int64_t oh, int64_t ow, int64_t* arg) {
  return max_window_of<A>(PlaneValues<A, T>{xp}, g, oh, ow, arg);
}

// Window rows [h0, h1) and columns [w0, w1) clipped to the plane, and its divisor: the window's
// size within the padded input (count_include_pad) or within the plane.
struct AvgWindow {
  int64_t h0, h1, w0, w1, div;
};
TR_HD AvgWindow avg_window(const Geom& g, int64_t oh, int64_t ow, bool count_include_pad) {
  int64_t h0 = oh * g.SH - g.PH, w0 = ow * g.SW - g.PW;
  int64_t h1 = h0 + g.KH < g.H + g.PH ? h0 + g.KH : g.H + g.PH;
  int64_t w1 = w0 + g.KW < g.W + g.PW ? w0 + g.KW : g.W + g.PW;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < g.H ? h1 : g.H;
  w1 = w1 < g.W ? w1 : g.W;
  return {h0, h1, w0, w1, count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

// y = sum over window (oh, ow) of xp / divisor
template <typename A, typename T>
TR_HD A avg_at(const T* xp, const Geom& g, int64_t oh, int64_t ow, bool count_include_pad) {
  const AvgWindow win = avg_window(g, oh, ow, count_include_pad);
  A s = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) s += A(xp[ih * g.W + iw]);
  return s / A(win.div);
}

// The output rows [*o0, *o1) whose windows can contain input row `i` (stride s, padding p, kernel
// k, dilation d, n output rows): the windows starting at or after i + p - (k - 1) d and at or
// before i + p. Windows in between may still skip i when d > 1; callers test each tap.
TR_HD void windows_over(int64_t i, int64_t s, int64_t p, int64_t k, int64_t d, int64_t n, int64_t* o0, int64_t* o1) {
  const int64_t lo = i + p - (k - 1) * d;  // a window starting here has its last tap at i
  *o0 = lo <= 0 ? 0 : (lo + s - 1) / s;
  const int64_t hi = (i + p) / s + 1;
  *o1 = hi < n ? hi : n;
}

// gx[ih, iw] = sum over the windows containing (ih, iw), in ascending (oh, ow) order, of
// gy[oh, ow] / divisor: the order in which the CPU's scatter adds them.
template <typename A, typename T>
TR_HD A avg_backward_at(const T* gyp, const Geom& g, int64_t ih, int64_t iw, bool count_include_pad) {
  int64_t oh0, oh1, ow0, ow1;
  windows_over(ih, g.SH, g.PH, g.KH, 1, g.OH, &oh0, &oh1);
  windows_over(iw, g.SW, g.PW, g.KW, 1, g.OW, &ow0, &ow1);
  A s = 0;
  for (int64_t oh = oh0; oh < oh1; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const AvgWindow win = avg_window(g, oh, ow, count_include_pad);
      if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
      s += A(gyp[oh * g.OW + ow]) / A(win.div);
    }
  return s;
}

// gx[ih, iw] = sum of gy[oh, ow] over the outputs whose argmax is (ih, iw), in ascending (oh, ow)
// order (the CPU's scatter order). Only windows that can contain the tap are visited. With yp (a
// relu below the pool), only outputs whose value yp[oh, ow] is > 0 count: threshold_backward's
// mask at the argmax, whose relu output that value is.
template <typename A, typename T> TR_HD A max_backward_at(const T* gyp, const int64_t* idxp, const Geom& g, int64_t ih,
                                                          int64_t iw, const T* yp = nullptr) {
  int64_t oh0, oh1, ow0, ow1;
  windows_over(ih, g.SH, g.PH, g.KH, g.DH, g.OH, &oh0, &oh1);
  windows_over(iw, g.SW, g.PW, g.KW, g.DW, g.OW, &ow0, &ow1);
  const int64_t at = ih * g.W + iw;
  A s = 0;
  for (int64_t oh = oh0; oh < oh1; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const int64_t o = oh * g.OW + ow;
      if (idxp[o] == at && (yp == nullptr || A(yp[o]) > A(0))) s += A(gyp[o]);
    }
  return s;
}

}  // namespace tr::pool
