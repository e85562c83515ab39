#include "nn/repr.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include "core/error.h"

namespace tr::nn {

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // shortest round-tripping digits d.ddd x 10^e
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  size_t epos = s.find('e');
  int e = std::atoi(s.c_str() + epos + 1);
  std::string sign = v < 0 ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < epos; ++i)
    if (s[i] != '.') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (e < -4 || e >= 16) {  // scientific, as Python's repr: 1e-05, 1.5e+20
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    return sign + m + eb;
  }
  if (e < 0) return sign + "0." + std::string(size_t(-e - 1), '0') + digits;
  if (int(digits.size()) <= e + 1) return sign + digits + std::string(size_t(e + 1) - digits.size(), '0') + ".0";
  return sign + digits.substr(0, size_t(e + 1)) + "." + digits.substr(size_t(e + 1));
}

std::string number_repr(double v) {
  return v == std::floor(v) && std::abs(v) < 1e15 ? std::to_string(int64_t(v)) : float_repr(v);
}

std::string pair_repr(const Pair& p) { return str("(", p[0], ", ", p[1], ")"); }

std::string int_or_pair_repr(const Pair& p) { return p[0] == p[1] ? str(p[0]) : pair_repr(p); }

}  // namespace tr::nn
