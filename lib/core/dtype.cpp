#include "core/dtype.h"
#include "core/error.h"

namespace tr {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "uint8";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
  }
  return "?";
}

DType dtype_from_name(const std::string& s) {
  if (s == "bool") return DType::Bool;
  if (s == "uint8" || s == "u8") return DType::U8;
  if (s == "int32" || s == "i32" || s == "int") return DType::I32;
  if (s == "int64" || s == "i64" || s == "long") return DType::I64;
  if (s == "float16" || s == "f16" || s == "fp16" || s == "half") return DType::F16;
  if (s == "bfloat16" || s == "bf16") return DType::BF16;
  if (s == "float32" || s == "f32" || s == "fp32" || s == "float") return DType::F32;
  if (s == "float64" || s == "f64" || s == "fp64" || s == "double") return DType::F64;
  throw Error(str("unknown dtype '", s, "' (known: bool, uint8, int32, int64, float16, bfloat16, float32, float64)"));
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // f16 with bf16 promotes to f32, as in torch.
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

void throw_dtype_unsupported(const char* what, DType t) {
  throw Error(str(what, ": dtype ", dtype_name(t), " is not supported"));
}

}  // namespace tr
