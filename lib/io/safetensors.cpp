// Tensor save/load on top of the safetensors format layer.
#include "io/safetensors.h"
#include <limits>

namespace tr::io {

namespace st = safetensors;

namespace {

constexpr DType kOurs[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                           DType::I64, DType::I32, DType::U8,  DType::Bool};

std::string supported_names() {
  std::string s;
  for (DType t : kOurs) s += (s.empty() ? "" : " ") + std::string(safetensors_dtype(t));
  return s;
}

}  // namespace

st::Dtype to_safetensors(DType t) {
  switch (t) {
    case DType::F32: return st::Dtype::F32;
    case DType::F64: return st::Dtype::F64;
    case DType::F16: return st::Dtype::F16;
    case DType::BF16: return st::Dtype::BF16;
    case DType::I64: return st::Dtype::I64;
    case DType::I32: return st::Dtype::I32;
    case DType::U8: return st::Dtype::U8;
    case DType::Bool: return st::Dtype::BOOL;
  }
  throw Error(str("safetensors: no format dtype for dtype #", int(t)));
}

std::optional<DType> from_safetensors(st::Dtype d) {
  for (DType t : kOurs)
    if (to_safetensors(t) == d) return t;
  return std::nullopt;
}

const char* safetensors_dtype(DType t) { return st::dtype_name(to_safetensors(t)); }

DType dtype_from_safetensors(const std::string& s) {
  auto d = st::dtype_from_name(s);
  TR_CHECK(d, "safetensors: unknown dtype '", s, "' (supported: ", supported_names(), ")");
  auto t = from_safetensors(*d);
  TR_CHECK(t, "safetensors: dtype '", s, "' has no tensor type in trainer (supported: ", supported_names(), ")");
  return *t;
}

void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> keep;  // owns the CPU contiguous copies while the file is written
  std::vector<st::TensorData> data;
  keep.reserve(tensors.size());
  data.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    TR_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", name, "' is undefined");
    Tensor c = t.detach().to(kCPU).contiguous();
    keep.push_back(c);
    std::vector<uint64_t> shape(c.sizes().begin(), c.sizes().end());
    data.push_back({name, to_safetensors(c.dtype()), shape, c.raw_data(), uint64_t(c.numel()) * c.element_size()});
  }
  try {
    st::write_file(path, data, metadata);
  } catch (const Error& e) {
    if (std::string(e.what()).find(path) != std::string::npos) throw;  // it names the file already
    throw Error(str("save_safetensors '", path, "': ", e.what()));
  }
}

NamedTensorList load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  st::Reader r(path);
  const st::Header& h = r.header();
  // Everything is checked before the first allocation: dtypes we can hold, dims that fit int64.
  std::vector<std::pair<DType, Shape>> plan;
  plan.reserve(h.tensors.size());
  for (const auto& info : h.tensors) {
    auto t = from_safetensors(info.dtype);
    TR_CHECK(t, path, ": tensor '", info.name, "' has dtype ", st::dtype_name(info.dtype),
             ", which trainer cannot load (supported: ", supported_names(), ")");
    Shape shape;
    for (uint64_t s : info.shape) {
      TR_CHECK(s <= uint64_t(std::numeric_limits<int64_t>::max()), path, ": tensor '", info.name, "' has dimension ", s,
               ", larger than int64");
      shape.push_back(int64_t(s));
    }
    plan.emplace_back(*t, std::move(shape));
  }
  NamedTensorList out;
  out.reserve(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    Tensor t = empty(plan[i].second, plan[i].first);
    if (h.tensors[i].nbytes() > 0) r.read(h.tensors[i], t.raw_data());
    out.emplace_back(h.tensors[i].name, std::move(t));
  }
  if (metadata)
    for (const auto& [k, v] : h.metadata) (*metadata)[k] = v;
  return out;
}

}  // namespace tr::io
