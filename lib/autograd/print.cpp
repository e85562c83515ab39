// Tensor printing in torch's repr format (here, above autograd, because the repr names grad_fn): a port of torch 1.13's
// torch/_tensor_str.py (threshold 1000, edgeitems 3, linewidth 80, automatic sci_mode, settable precision) for strided
// real tensors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>
#include "autograd/print.h"
#include <sstream>
#include "autograd/node.h"

namespace tr {

namespace {

int g_precision = 4;
constexpr int64_t kThreshold = 1000;  // numel above which a tensor is summarized
constexpr int64_t kEdgeItems = 3;     // items kept at each end of a summarized dimension
constexpr int64_t kLineWidth = 80;

// Reads elements of a CPU tensor by element offset from raw_data(); f16/bf16 read as float, as torch
// converts them with .float() before formatting.
struct Elements {
  const char* base;
  DType dtype;

  double as_double(int64_t off) const {
    const char* p = base + off * int64_t(itemsize(dtype));
    switch (dtype) {
      case DType::Bool: return *reinterpret_cast<const bool*>(p) ? 1.0 : 0.0;
      case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
      case DType::I32: return *reinterpret_cast<const int32_t*>(p);
      case DType::I64: return double(*reinterpret_cast<const int64_t*>(p));
      case DType::F16: return float(*reinterpret_cast<const Half*>(p));
      case DType::BF16: return float(*reinterpret_cast<const BFloat16*>(p));
      case DType::F32: return *reinterpret_cast<const float*>(p);
      case DType::F64: return *reinterpret_cast<const double*>(p);
    }
    return 0.0;
  }
  int64_t as_int(int64_t off) const {
    const char* p = base + off * int64_t(itemsize(dtype));
    switch (dtype) {
      case DType::Bool: return *reinterpret_cast<const bool*>(p) ? 1 : 0;
      case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
      case DType::I32: return *reinterpret_cast<const int32_t*>(p);
      case DType::I64: return *reinterpret_cast<const int64_t*>(p);
      default: return int64_t(as_double(off));
    }
  }
};

// Python's "{:.<prec><conv>}".format(v) for conv 'f' or 'e': like printf, but NaN never carries a sign.
std::string format_float(double v, int precision, char conv) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char fmt[8] = {'%', '.', '*', conv, 0};
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// torch's _Formatter: picks int_mode / sci_mode and the common width from the (summarized) values.
class Formatter {
 public:
  Formatter(const Elements& el, const std::vector<int64_t>& offsets, int precision)
      : el_(el), precision_(precision), floating_(is_floating(el.dtype)) {
    if (!floating_) {
      for (int64_t off : offsets) width_ = std::max(width_, format_int(off).size());
      return;
    }
    std::vector<double> vals;  // nonzero finite values
    for (int64_t off : offsets) {
      double v = el_.as_double(off);
      if (std::isfinite(v) && v != 0.0) vals.push_back(v);
    }
    if (vals.empty()) return;
    double amin = INFINITY, amax = 0.0;
    for (double v : vals) {
      amin = std::min(amin, std::fabs(v));
      amax = std::max(amax, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (amax / amin > 1000.0 || amax > 1.0e8) {
        sci_mode_ = true;
        for (double v : vals) width_ = std::max(width_, format_float(v, precision_, 'e').size());
      } else {
        for (double v : vals) width_ = std::max(width_, format_float(v, 0, 'f').size() + 1);
      }
    } else {
      if (amax / amin > 1000.0 || amax > 1.0e8 || amin < 1.0e-4) {
        sci_mode_ = true;
        for (double v : vals) width_ = std::max(width_, format_float(v, precision_, 'e').size());
      } else {
        for (double v : vals) width_ = std::max(width_, format_float(v, precision_, 'f').size());
      }
    }
  }

  size_t width() const { return width_; }

  std::string format(int64_t off) const {
    std::string s;
    if (!floating_) {
      s = format_int(off);
    } else {
      double v = el_.as_double(off);
      if (sci_mode_) {
        s = format_float(v, precision_, 'e');
      } else if (int_mode_) {
        s = format_float(v, 0, 'f');
        if (std::isfinite(v)) s += ".";
      } else {
        s = format_float(v, precision_, 'f');
      }
    }
    return pad_left(s, width_);
  }

 private:
  std::string format_int(int64_t off) const {
    if (el_.dtype == DType::Bool) return el_.as_int(off) ? "True" : "False";
    return std::to_string(el_.as_int(off));
  }

  Elements el_;
  int precision_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// Offsets of the elements torch's get_summarized_data keeps (all of them when not summarizing).
void collect_offsets(const Shape& sizes, const Shape& strides, size_t d, int64_t off, bool summarize,
                     std::vector<int64_t>& out) {
  if (d == sizes.size()) {
    out.push_back(off);
    return;
  }
  int64_t n = sizes[d];
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i)
      collect_offsets(sizes, strides, d + 1, off + i * strides[d], summarize, out);
    for (int64_t i = n - kEdgeItems; i < n; ++i)
      collect_offsets(sizes, strides, d + 1, off + i * strides[d], summarize, out);
  } else {
    for (int64_t i = 0; i < n; ++i) collect_offsets(sizes, strides, d + 1, off + i * strides[d], summarize, out);
  }
}

struct Printer {
  const Shape& sizes;
  const Shape& strides;
  bool summarize;
  const Formatter& fmt;

  // torch's _vector_str: elements of the last dim, wrapped at linewidth.
  std::string vector_str(int64_t off, int64_t indent) const {
    int64_t element_length = int64_t(fmt.width()) + 2;
    int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / element_length);
    int64_t n = sizes.back(), st = strides.back();
    std::vector<std::string> data;
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) data.push_back(fmt.format(off + i * st));
      data.push_back(" ...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) data.push_back(fmt.format(off + i * st));
    } else {
      for (int64_t i = 0; i < n; ++i) data.push_back(fmt.format(off + i * st));
    }
    std::string out = "[";
    std::string line_sep = ",\n" + std::string(size_t(indent + 1), ' ');
    for (size_t i = 0; i < data.size(); ++i) {
      if (i > 0) out += (int64_t(i) % per_line == 0) ? line_sep : ", ";
      out += data[i];
    }
    return out + "]";
  }

  // torch's _tensor_str_with_formatter from dimension d on.
  std::string str(size_t d, int64_t off, int64_t indent) const {
    size_t dim = sizes.size() - d;
    if (dim == 0) return fmt.format(off);
    if (dim == 1) return vector_str(off, indent);
    std::vector<std::string> slices;
    int64_t n = sizes[d];
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) slices.push_back(str(d + 1, off + i * strides[d], indent + 1));
      slices.push_back("...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) slices.push_back(str(d + 1, off + i * strides[d], indent + 1));
    } else {
      for (int64_t i = 0; i < n; ++i) slices.push_back(str(d + 1, off + i * strides[d], indent + 1));
    }
    std::string sep = "," + std::string(dim - 1, '\n') + std::string(size_t(indent + 1), ' ');
    std::string out = "[";
    for (size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
    return out + "]";
  }
};

std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() == 1) out += ",";
  return out + ")";
}

// torch's _add_suffixes: ", suffix" on the last line, or on a new line when it would pass linewidth.
std::string add_suffixes(const std::string& tensor_str, const std::vector<std::string>& suffixes, int64_t indent) {
  std::string out = tensor_str;
  size_t nl = tensor_str.rfind('\n');
  // Python: len(s) - s.rfind("\n") + 1, with rfind = -1 when there is no newline.
  int64_t last_line_len = int64_t(tensor_str.size()) - (nl == std::string::npos ? -1 : int64_t(nl)) + 1;
  for (const auto& suffix : suffixes) {
    int64_t len = int64_t(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      out += ",\n" + std::string(size_t(indent), ' ') + suffix;
      last_line_len = indent + len;
    } else {
      out += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return out + ")";
}

std::string repr(const Tensor& input) {
  const std::string prefix = "tensor(";
  const int64_t indent = int64_t(prefix.size());
  std::vector<std::string> suffixes;
  if (input.device().is_cuda()) suffixes.push_back("device='" + input.device().str() + "'");

  Tensor t = input.device().is_cpu() ? input : input.cpu();
  DType dt = t.dtype();
  bool default_dtype = dt == DType::F32 || dt == DType::I64 || dt == DType::Bool;
  std::string dtype_suffix = std::string("dtype=torch.") + dtype_name(dt);

  std::string body;
  if (t.numel() == 0) {
    if (t.dim() != 1) suffixes.push_back("size=" + shape_tuple(t.sizes()));
    if (dt != DType::F32) suffixes.push_back(dtype_suffix);  // empty: dtype cannot be inferred from values
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back(dtype_suffix);
    bool summarize = t.numel() > kThreshold;
    Elements el{static_cast<const char*>(t.raw_data()), dt};
    std::vector<int64_t> offsets;
    collect_offsets(t.sizes(), t.strides(), 0, 0, summarize, offsets);
    Formatter fmt(el, offsets, g_precision);
    Printer p{t.sizes(), t.strides(), summarize, fmt};
    body = p.str(0, 0, indent);
  }

  if (input.grad_fn()) {
    suffixes.push_back("grad_fn=<" + input.grad_fn()->name() + ">");
  } else if (input.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

}  // namespace

void set_print_precision(int digits) {
  TR_CHECK(digits >= 0 && digits <= 100, "set_print_precision: precision must be in [0, 100], got ", digits);
  g_precision = digits;
}
int print_precision() { return g_precision; }

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  return os << repr(t);
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

}  // namespace tr
