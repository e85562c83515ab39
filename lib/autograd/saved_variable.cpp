#include "autograd/saved_variable.h"
#include "autograd/node.h"

namespace tr {

namespace {
// A tensor sharing t's storage and geometry but with no autograd metadata.
Tensor shallow_copy(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl()->storage;
  impl->sizes = t.impl()->sizes;
  impl->strides = t.impl()->strides;
  impl->offset = t.impl()->offset;
  impl->dtype = t.impl()->dtype;
  impl->is_view = t.impl()->is_view;
  impl->wrapped_number = t.impl()->wrapped_number;
  return Tensor(impl);
}
}  // namespace

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  defined_ = true;
  is_output_ = is_output;
  saved_version_ = t.version();
  requires_grad_ = t.requires_grad();
  if (is_output && t.grad_fn()) {
    data_ = shallow_copy(t);
    weak_grad_fn_ = t.grad_fn();
    output_nr_ = t.output_nr();
  } else {
    data_ = t;
    is_output_ = false;
  }
}

Tensor SavedVariable::unpack(const std::string& saved_by) const {
  if (!defined_) return Tensor();
  TR_CHECK(!released_,
           "Trying to backward through the graph a second time (or directly access saved tensors "
           "after they have already been freed), in ",
           saved_by, ". Specify retain_graph=true if you need to backward through the graph a second time.");
  if (data_.version() != saved_version_) {
    throw Error(
        str("one of the variables needed for gradient computation has been modified by an inplace "
            "operation: [",
            dtype_name(data_.dtype()), " tensor of shape ", data_.sizes(), "] is at version ", data_.version(),
            "; expected version ", saved_version_, " instead (saved by ", saved_by,
            "). Hint: replace the in-place operation by an out-of-place one, or clone() before it."));
  }
  if (!is_output_) return data_;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = data_.impl()->storage;
  impl->sizes = data_.impl()->sizes;
  impl->strides = data_.impl()->strides;
  impl->offset = data_.impl()->offset;
  impl->dtype = data_.impl()->dtype;
  impl->is_view = data_.impl()->is_view;
  Tensor out(impl);
  if (requires_grad_) {
    auto fn = weak_grad_fn_.lock();
    if (fn) set_history(out, fn, output_nr_);
  }
  return out;
}

void SavedVariable::reset() {
  if (!defined_) return;
  defer_release_tensor(data_);
  released_ = true;
}

}  // namespace tr
