// Elementwise activation modules (torch.nn.ReLU, ReLU6, GELU, SiLU, Tanh, Sigmoid, Softplus): no
// parameters, any input shape, output of the same shape.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

// y = max(0, x)
class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

// y = min(max(0, x), 6); dy/dx = 1 on (0, 6) only (torch's hardtanh backward)
class ReLU6 : public Module {
 public:
  ReLU6() : Module("ReLU6") {}
  Tensor forward(const Tensor& x) override;
};

// y = x Phi(x) ("none"), or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ("tanh")
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

// y = x sigmoid(x)
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

// y = 1 / (1 + exp(-x))
class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

// y = log(1 + exp(beta x)) / beta, and x where beta x > threshold
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta, threshold;
};

// Python's repr of a float as torch's extra_repr prints it: 1e-05, 0.1, 0.5, 1e+20.
std::string py_float(double v);

}  // namespace tr::nn
