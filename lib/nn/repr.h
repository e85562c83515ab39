// Python's reprs of numbers and pairs, as torch's Module.extra_repr prints them.
#pragma once
#include <string>
#include "ops/pair.h"

namespace tr::nn {

// repr(float): the shortest text that reads back, "1e-05", "0.1", "20.0", "1.5e+20".
std::string float_repr(double v);
// A number torch keeps as an int when it is one (Softplus' beta=1, threshold=20): "20", else float_repr.
std::string number_repr(double v);
// A pair as a tuple: "(3, 3)".
std::string pair_repr(const Pair& p);
// A pair as torch's pooling reprs print it: "2" when square, else "(2, 3)".
std::string int_or_pair_repr(const Pair& p);

}  // namespace tr::nn
