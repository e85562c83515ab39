// SavedVariable: a tensor kept for backward. Remembers the version of its storage so that an
// in-place change after saving is an error at backward time. Outputs are stored without their
// grad_fn (a weak link) to avoid a reference cycle node -> output -> node.
#pragma once
#include <memory>
#include <string>
#include "core/tensor.h"

namespace tr {

class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  // Returns the saved tensor; throws if it was modified in place or already freed.
  Tensor unpack(const std::string& saved_by) const;
  void reset();
  bool defined() const { return defined_; }

 private:
  Tensor data_;
  bool defined_ = false;
  bool is_output_ = false;
  bool released_ = false;
  bool requires_grad_ = false;
  uint32_t output_nr_ = 0;
  std::weak_ptr<Node> weak_grad_fn_;
  uint64_t saved_version_ = 0;
};

}  // namespace tr
