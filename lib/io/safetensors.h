// safetensors: an 8-byte little-endian header length, a JSON header mapping each tensor name to
// {dtype, shape, data_offsets}, optional "__metadata__", then the raw little-endian data.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>
#include "core/tensor.h"

namespace tr::io {

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

// Writes tensors (CPU copies are made as needed) in the given order; offsets 8-byte aligned.
void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor; the header is checked against the file size, the dtype names and the shapes.
NamedTensorList load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

const char* safetensors_dtype(DType t);  // "F32", "BF16", "I64", "BOOL", ...
DType dtype_from_safetensors(const std::string& s);

}  // namespace tr::io
