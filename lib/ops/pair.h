// torch's _pair: the {h, w} arguments of 2-D convolution and pooling, where one value means both.
#pragma once
#include <cstdint>
#include <vector>

namespace tr {

using Pair = std::vector<int64_t>;  // {h, w}; a single value {k} means {k, k}

// {k} -> {k, k}; checks there are 1 or 2 values, each >= lo. Errors name `who` (the op or layer)
// and the argument: "Conv2d: stride must be >= 1, got [0]".
Pair expand_pair(const Pair& p, const char* who, const char* name, int64_t lo);

}  // namespace tr
