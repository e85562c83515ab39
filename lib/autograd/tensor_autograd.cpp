// The autograd methods of Tensor (declared in core/tensor.h): backward, retain_grad and tensor hooks.
#include "autograd/engine.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace tr {

void Tensor::backward(const Tensor& g, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, g.defined() ? std::vector<Tensor>{g} : std::vector<Tensor>{}, retain_graph, create_graph);
}
void Tensor::retain_grad() const {
  TR_CHECK(requires_grad(), "retain_grad: can't retain_grad on a Tensor that has requires_grad=False");
  if (is_leaf() || retains_grad()) return;
  AutogradMeta& m = mutable_autograd_meta();
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  m.retain_grad_hook = register_hook([weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      AutogradMeta& mm = *impl->autograd;
      if (!mm.grad.defined())
        mm.grad = g.detach().clone();
      else
        mm.grad = add(mm.grad, g.detach());
    }
    return Tensor();
  });
}
int Tensor::register_hook(TensorHook hook) const {
  TR_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  Edge e = gradient_edge(*this);
  int id = next_hook_id();
  e.fn->pre_hooks[e.input_nr].push_back({id, std::move(hook)});
  return id;
}
void Tensor::remove_hook(int handle) const {
  Edge e = gradient_edge(*this);
  if (!e.fn) return;
  auto& v = e.fn->pre_hooks[e.input_nr];
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it->first == handle) {
      v.erase(it);
      return;
    }
}

}  // namespace tr
