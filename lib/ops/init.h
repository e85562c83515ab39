// torch.nn.init: in-place initialisers on the seeded generator (default_generator() when none).
#pragma once
#include <string>
#include <utility>
#include "core/rng.h"
#include "core/tensor.h"

namespace tr::init {

// (fan_in, fan_out) as torch computes them: dim 1 / dim 0 times the receptive field size.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// Recommended gain for a nonlinearity: linear/conv/sigmoid 1, tanh 5/3, relu sqrt 2, leaky_relu sqrt(2/(1+a^2)), selu
// 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double v);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// a: negative slope of leaky_relu; mode "fan_in" | "fan_out"
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, Generator* gen = nullptr, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu");
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, Generator* gen = nullptr, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace tr::init
