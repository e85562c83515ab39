// Graph nodes of the autograd graph. A Node is the backward of one forward call: it maps the
// gradients of that call's outputs to gradients of its inputs, which flow along next_edges.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "core/tensor.h"

namespace tr {

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads: one per forward output (undefined where none arrived). Returns one per next_edge.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  // For error messages in anomaly mode: the forward op and the shapes it saw.
  virtual std::string forward_info() const { return name(); }

  uint64_t sequence_nr() const { return sequence_nr_; }
  size_t num_outputs() const { return output_specs.size(); }  // outputs of the forward call

  std::vector<Edge> next_edges;                       // one per forward input
  std::vector<std::pair<Shape, DType>> output_specs;  // of the forward outputs (sizes, dtype)
  // Tensor hooks by forward output index: run on the incoming gradient before apply().
  std::map<uint32_t, std::vector<std::pair<int, TensorHook>>> pre_hooks;

 protected:
  uint64_t sequence_nr_;
};

// The sink for a leaf tensor: adds the incoming gradient into leaf.grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }
  // Run after the gradient has been added into leaf.grad (torch's post-accumulate-grad hooks:
  // DDP starts a bucket's allreduce from them while backward goes on).
  std::vector<std::pair<int, std::function<void(Tensor&)>>> post_hooks;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// torch.Tensor.register_post_accumulate_grad_hook: `hook(param)` runs each time backward has
// accumulated into param.grad. `param` must be a leaf that requires grad. Returns a handle.
int register_post_accumulate_grad_hook(const Tensor& param, std::function<void(Tensor&)> hook);
void remove_post_accumulate_grad_hook(const Tensor& param, int handle);

// The edge along which a tensor's gradient flows: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);
// Sets `t`'s history to (fn, output_nr); t must be a result of that call.
void set_history(Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);
int next_hook_id();
// Drop a reference without recursing: if it is the last one, the node is destroyed later by
// the outermost ~Node (keeps destruction of long chains iterative).
void defer_release(std::shared_ptr<Node>& p);
void defer_release_tensor(Tensor& t);

}  // namespace tr
