// Tensor -> kernel argument adapters shared by the CUDA launchers.
#include "ops/cuda/tensor_args.h"
#include <algorithm>
#include <cstring>
#include "core/cuda/cuda_check.h"
#include "core/cuda_hooks.h"

namespace tr::cuda {

bool is_host_scalar(const Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

uint64_t scalar_bits(const Tensor& t) {
  TR_CHECK(t.device().is_cpu() && t.numel() == 1, "scalar_bits: expected a one-element CPU tensor, got shape ",
           t.sizes(), " on ", t.device().str());
  uint64_t bits = 0;
  std::memcpy(&bits, t.raw_data(), t.element_size());
  return bits;
}

uint64_t value_bits(double v, DType t) {
  uint64_t bits = 0;
  TR_DISPATCH_ALL(t, "fill_", [&] {
    scalar_t s;
    if constexpr (std::is_same_v<scalar_t, bool>)
      s = static_cast<float>(v) != 0.0f;
    else if constexpr (std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>)
      s = scalar_t(static_cast<float>(v));
    else
      s = static_cast<scalar_t>(v);
    std::memcpy(&bits, &s, sizeof(s));
  });
  return bits;
}

std::vector<ElementwiseArgs> elementwise_args(const Tensor& out, const std::vector<Tensor>& ins) {
  const int nops = 1 + int(ins.size());
  TR_CHECK(nops <= kMaxOperands, "elementwise_args: at most ", kMaxOperands - 1, " inputs, got ", ins.size());
  const Shape& shape = out.sizes();
  const int64_t numel = out.numel();
  if (numel == 0) return {};
  const int nd0 = int(shape.size());

  // Per-operand strides over out's shape (0 on broadcast dims and for host scalars).
  std::vector<Shape> st(size_t(nops), Shape(size_t(nd0), 0));
  std::vector<char*> base(size_t(nops), nullptr);
  std::vector<size_t> esize(size_t(nops), 0);
  ElementwiseArgs proto;
  proto.nops = nops;
  st[0] = out.strides();
  base[0] = static_cast<char*>(out.raw_data());
  esize[0] = out.element_size();
  for (int k = 1; k < nops; ++k) {
    const Tensor& t = ins[size_t(k - 1)];
    esize[size_t(k)] = t.element_size();
    if (is_host_scalar(t)) {
      proto.scalar[k] = scalar_bits(t);
      continue;
    }
    TR_CHECK(t.device() == out.device(), "elementwise op: input ", k - 1, " is on ", t.device().str(),
             " but the output is on ", out.device().str());
    base[size_t(k)] = static_cast<char*>(t.raw_data());
    const int64_t off = nd0 - t.dim();
    TR_CHECK(off >= 0, "elementwise op: input of shape ", t.sizes(), " does not broadcast to ", shape);
    for (int64_t d = 0; d < t.dim(); ++d) {
      TR_CHECK(t.size(d) == shape[size_t(d + off)] || t.size(d) == 1, "elementwise op: input of shape ", t.sizes(),
               " does not broadcast to ", shape);
      st[size_t(k)][size_t(d + off)] = t.size(d) == 1 ? 0 : t.stride(d);
    }
  }

  // Merge dims (dropping size-1 dims) where every operand is contiguous across the pair.
  Shape sizes;
  std::vector<Shape> mst{size_t(nops)};
  for (int d = 0; d < nd0; ++d) {
    if (shape[size_t(d)] == 1) continue;
    if (!sizes.empty()) {
      bool merge = true;
      for (int k = 0; k < nops; ++k)
        if (mst[size_t(k)].back() != st[size_t(k)][size_t(d)] * shape[size_t(d)]) merge = false;
      if (merge) {
        sizes.back() *= shape[size_t(d)];
        for (int k = 0; k < nops; ++k) mst[size_t(k)].back() = st[size_t(k)][size_t(d)];
        continue;
      }
    }
    sizes.push_back(shape[size_t(d)]);
    for (int k = 0; k < nops; ++k) mst[size_t(k)].push_back(st[size_t(k)][size_t(d)]);
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (int k = 0; k < nops; ++k) mst[size_t(k)].push_back(0);
  }

  // The trailing kMaxDims dims go to the kernel; leading dims are looped here.
  const int nd = int(sizes.size());
  const int lead = std::max(0, nd - kMaxDims);
  proto.ndim = nd - lead;
  proto.numel = 1;
  for (int d = lead; d < nd; ++d) {
    proto.sizes[d - lead] = sizes[size_t(d)];
    proto.numel *= sizes[size_t(d)];
    for (int k = 0; k < nops; ++k) proto.strides[k][d - lead] = mst[size_t(k)][size_t(d)];
  }
  proto.index32 = proto.numel < (int64_t(1) << 31);
  int64_t launches = 1;
  for (int d = 0; d < lead; ++d) launches *= sizes[size_t(d)];
  std::vector<ElementwiseArgs> r;
  r.reserve(size_t(launches));
  for (int64_t l = 0; l < launches; ++l) {
    ElementwiseArgs a = proto;
    int64_t rem = l;
    for (int k = 0; k < nops; ++k) a.ptr[k] = base[size_t(k)];
    for (int d = lead - 1; d >= 0; --d) {
      const int64_t idx = rem % sizes[size_t(d)];
      rem /= sizes[size_t(d)];
      for (int k = 0; k < nops; ++k)
        if (base[size_t(k)])
          a.ptr[k] = static_cast<char*>(a.ptr[k]) + idx * mst[size_t(k)][size_t(d)] * int64_t(esize[size_t(k)]);
    }
    r.push_back(a);
  }
  return r;
}

namespace {
// Merges adjacent dims of one group (kept or reduced) of x; false when more than kMaxDims remain.
bool merge_group(const Tensor& x, const Shape& group, int& nd, int64_t (&sizes)[kMaxDims],
                 int64_t (&strides)[kMaxDims]) {
  Shape sz, stv;
  for (int64_t d : group) {
    if (x.size(d) == 1) continue;
    if (!sz.empty() && stv.back() == x.stride(d) * x.size(d)) {
      sz.back() *= x.size(d);
      stv.back() = x.stride(d);
      continue;
    }
    sz.push_back(x.size(d));
    stv.push_back(x.stride(d));
  }
  if (sz.size() > size_t(kMaxDims)) return false;
  nd = int(sz.size());
  for (int i = 0; i < nd; ++i) {
    sizes[i] = sz[size_t(i)];
    strides[i] = stv[size_t(i)];
  }
  return true;
}
}  // namespace

bool reduce_args(const Tensor& x, const Shape& dims, ReduceArgs& a) {
  Shape kept;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  a = ReduceArgs{};
  a.in = x.raw_data();
  a.M = 1;
  a.K = 1;
  for (int64_t d : kept) a.M *= x.size(d);
  for (int64_t d : dims) a.K *= x.size(d);
  if (!merge_group(x, kept, a.out_ndim, a.out_sizes, a.out_strides)) return false;
  if (!merge_group(x, dims, a.red_ndim, a.red_sizes, a.red_strides)) return false;
  // Lanes of a warp walk whichever side is contiguous in memory.
  const bool red_unit = a.red_ndim > 0 && a.red_strides[a.red_ndim - 1] == 1;
  const bool out_unit = a.out_ndim > 0 && a.out_strides[a.out_ndim - 1] == 1;
  if (red_unit && a.K >= 16)
    a.red_inner = true;
  else if (out_unit)
    a.red_inner = false;
  else
    a.red_inner = a.K >= 32 || a.M == 1;
  return true;
}

Tensor workspace(size_t bytes, Device device) {
  return empty({int64_t(std::max<size_t>(bytes, 1))}, TensorOptions(DType::U8).device(device));
}

void upload_bytes(void* device_dst, Device device, const std::vector<unsigned char>& host) {
  cuda::memcpy(device_dst, device, host.data(), kCPU, host.size());
}

}  // namespace tr::cuda
