// safetensors for Tensors: save a named list of tensors, load one back. The format itself (header
// validation, reading, writing) lives in io/safetensors_format.h; this file maps our dtypes onto it.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "core/tensor.h"
#include "io/safetensors_format.h"

namespace tr::io {

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

// Writes tensors (CPU contiguous copies are made as needed) back to back in the given order;
// metadata goes to "__metadata__" (strings only, as the format requires). Not fsynced.
void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor, in file (offset) order, to the CPU. The whole header is validated before any
// data is read, and every dtype is checked to be one of ours, so a bad file fails without allocating.
NamedTensorList load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

const char* safetensors_dtype(DType t);  // "F32", "BF16", "I64", "BOOL", ...
// Our dtype for a format name; throws for unknown names and for format dtypes we have no tensor for
// (F8_E4M3, I16, U16, C64, ...), listing the supported ones.
DType dtype_from_safetensors(const std::string& s);

// The same mapping on the format layer's enum.
safetensors::Dtype to_safetensors(DType t);
std::optional<DType> from_safetensors(safetensors::Dtype d);  // nullopt when we have no such dtype

}  // namespace tr::io
