#include "autograd/function.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace tr::autograd {

namespace {

class FunctionNode : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros(output_specs[i].first, TensorOptions(output_specs[i].second));
    ctx->needs_input_grad.assign(next_edges.size(), false);
    for (size_t i = 0; i < next_edges.size(); ++i) ctx->needs_input_grad[i] = next_edges[i].valid();
    std::vector<Tensor> r = backward(*ctx, grads);
    TR_CHECK(r.size() == next_edges.size(), name_, ".backward returned ", r.size(), " gradients but forward had ",
             next_edges.size(), " inputs");
    return r;
  }
  std::string name() const override { return name_ + "Backward"; }
  void release_saved() override { ctx->release_saved(); }

  std::shared_ptr<FunctionCtx> ctx;
  std::vector<Tensor> (*backward)(FunctionCtx&, const std::vector<Tensor>&) = nullptr;
  std::string name_;
};

}  // namespace

std::vector<Tensor> FunctionCtx::saved_tensors() const {
  std::vector<Tensor> r;
  for (auto& s : saved_) r.push_back(s.unpack(name_ + "Backward"));
  return r;
}

std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> (*forward)(FunctionCtx&, const std::vector<Tensor>&),
                                   std::vector<Tensor> (*backward)(FunctionCtx&, const std::vector<Tensor>&),
                                   Attrs data) {
  auto ctx = std::make_shared<FunctionCtx>();
  ctx->name_ = name;
  ctx->saved_data = std::move(data);
  std::vector<Tensor> outputs;
  {
    NoGradGuard ng;
    outputs = forward(*ctx, inputs);
  }
  bool needs = false;
  if (GradMode::is_enabled())
    for (auto& t : inputs) needs = needs || (t.defined() && t.requires_grad());
  auto is_output = [&](const Tensor& t) {
    for (auto& o : outputs)
      if (o.is_same(t)) return true;
    return false;
  };
  if (!needs) {
    for (auto& t : ctx->to_save_) ctx->saved_.emplace_back(t, false);
    ctx->to_save_.clear();
    return outputs;
  }
  auto node = std::make_shared<FunctionNode>();
  node->ctx = ctx;
  node->backward = backward;
  node->name_ = name;
  for (auto& t : inputs) node->next_edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    // an output that is an input is returned as a fresh alias so that its history is its own
    for (auto& in : inputs)
      if (outputs[i].is_same(in)) outputs[i] = in.detach();
    node->output_specs.push_back({outputs[i].sizes(), outputs[i].dtype()});
    if (outputs[i].is_floating_point()) set_history(outputs[i], node, i);
  }
  for (auto& t : ctx->to_save_) ctx->saved_.emplace_back(t, is_output(t));
  ctx->to_save_.clear();
  return outputs;
}

}  // namespace tr::autograd
