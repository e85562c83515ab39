#include "io/safetensors.h"
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tr::io {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

DType dtype_from_safetensors(const std::string& s) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool})
    if (s == safetensors_dtype(t)) return t;
  throw Error(str("safetensors: unsupported dtype '", s, "' (supported: F32 F64 F16 BF16 I64 I32 U8 BOOL)"));
}

void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> data;
  uint64_t off = 0;
  for (auto& [name, t] : tensors) {
    Tensor c = t.detach().to(kCPU).contiguous();
    uint64_t n = uint64_t(c.numel()) * itemsize(c.dtype());
    header[name] = {{"dtype", safetensors_dtype(c.dtype())}, {"shape", c.sizes()}, {"data_offsets", {off, off + n}}};
    off += n;
    data.push_back(c);
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // data starts 8-byte aligned
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TR_CHECK(f.good(), "cannot write '", path, "'");
  uint64_t hl = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(hl >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), std::streamsize(h.size()));
  for (auto& c : data) f.write(static_cast<const char*>(c.raw_data()), std::streamsize(c.numel() * int64_t(c.element_size())));
  f.flush();
  TR_CHECK(f.good(), "error writing '", path, "'");
}

NamedTensorList load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  TR_CHECK(f.good(), "cannot open '", path, "'");
  uint64_t size = uint64_t(f.tellg());
  f.seekg(0);
  TR_CHECK(size >= 8, path, ": not a safetensors file (", size, " bytes, shorter than the 8-byte header length)");
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= uint64_t(len[i]) << (8 * i);
  TR_CHECK(hl <= size - 8 && hl <= (100u << 20), path, ": header length ", hl, " exceeds the file size ", size);
  std::string h(hl, '\0');
  f.read(h.data(), std::streamsize(hl));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(h);
  } catch (const std::exception& e) {
    throw Error(str(path, ": invalid safetensors JSON header: ", e.what()));
  }
  TR_CHECK(header.is_object(), path, ": safetensors header must be a JSON object");
  uint64_t data_size = size - 8 - hl;
  NamedTensorList out;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (metadata)
        for (auto& [k, mv] : v.items()) (*metadata)[k] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      continue;
    }
    TR_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"), path,
             ": tensor '", name, "' lacks dtype, shape or data_offsets");
    DType dt = dtype_from_safetensors(v["dtype"].get<std::string>());
    Shape shape = v["shape"].get<Shape>();
    auto offs = v["data_offsets"].get<std::vector<uint64_t>>();
    TR_CHECK(offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size, path, ": tensor '", name,
             "' has data_offsets outside the data (", data_size, " bytes)");
    for (auto d : shape) TR_CHECK(d >= 0, path, ": tensor '", name, "' has a negative dimension");
    uint64_t want = uint64_t(numel_of(shape)) * itemsize(dt);
    TR_CHECK(offs[1] - offs[0] == want, path, ": tensor '", name, "' of dtype ", v["dtype"].get<std::string>(),
             " and shape ", shape, " needs ", want, " bytes but its offsets span ", offs[1] - offs[0]);
    Tensor t = empty(shape, dt);
    f.seekg(std::streamoff(8 + hl + offs[0]));
    f.read(static_cast<char*>(t.raw_data()), std::streamsize(want));
    TR_CHECK(f.good(), path, ": truncated while reading '", name, "'");
    out.emplace_back(name, t);
  }
  // the header is an unordered JSON object: restore file order by offset
  std::sort(out.begin(), out.end(), [&](auto& a, auto& b) {
    return header[a.first]["data_offsets"][0].template get<uint64_t>() < header[b.first]["data_offsets"][0].template get<uint64_t>();
  });
  return out;
}

}  // namespace tr::io
