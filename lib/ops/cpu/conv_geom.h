// The geometry of one 2-D convolution, shared by the CPU kernels (ops/cpu/conv.cpp) and the oneDNN
// path (ops/cpu/onednn_conv.h).
#pragma once
#include <cstdint>

namespace tr::cpu {

// Geometry of one convolution: x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, OH, OW];
// output (oh, ow) tap (i, j) reads x at (oh*SH - PH + i*DH, ow*SW - PW + j*DW), zero outside.
struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, SH, SW, PH, PW, DH, DW, G;
  int64_t Cg() const { return C / G; }
  int64_t Og() const { return O / G; }
  int64_t K() const { return Cg() * KH * KW; }  // rows of a group's column matrix
  int64_t P() const { return OH * OW; }         // output positions per plane
  // 1x1, stride 1, no padding: the column matrix is x itself.
  bool direct() const { return KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0 && PW == 0; }
};

}  // namespace tr::cpu
