// Custom differentiable functions (torch.autograd.Function): F supplies
//   static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& inputs);
//   static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& grad_outputs);
// forward runs without recording; backward is recorded when create_graph is set, so a backward
// written with differentiable ops supports double backward.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "autograd/saved_variable.h"
#include "core/tensor.h"
#include "ops/attrs.h"

namespace tr::autograd {

class FunctionCtx {
 public:
  void save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }
  std::vector<Tensor> saved_tensors() const;
  void release_saved() {
    for (auto& s : saved_) s.reset();
  }
  Attrs saved_data;                    // non-tensor state for backward
  std::vector<bool> needs_input_grad;  // set before backward runs

 private:
  friend std::vector<Tensor> apply_function(const std::string&, const std::vector<Tensor>&,
                                            std::vector<Tensor> (*)(FunctionCtx&, const std::vector<Tensor>&),
                                            std::vector<Tensor> (*)(FunctionCtx&, const std::vector<Tensor>&), Attrs);
  std::vector<Tensor> to_save_;
  std::vector<SavedVariable> saved_;
  std::string name_;
};

std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> (*forward)(FunctionCtx&, const std::vector<Tensor>&),
                                   std::vector<Tensor> (*backward)(FunctionCtx&, const std::vector<Tensor>&),
                                   Attrs data = {});  // initial ctx.saved_data (arguments for forward)

template <typename F> struct Function {
  static std::vector<Tensor> apply(const std::vector<Tensor>& inputs, const std::string& name = "CustomFunction",
                                   Attrs data = {}) {
    return apply_function(name, inputs, &F::forward, &F::backward, std::move(data));
  }
};

}  // namespace tr::autograd
