// OpNode: the backward of one call of a registered op, and the recorder that ops' dispatch calls
// to put such calls into the graph (installed here, so that lib/ops never names the graph).
#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// The backward of one call of a registered op.
class OpNode : public Node {
 public:
  OpNode(const OpDef& op, const Attrs& attrs) : op_(op), attrs_(attrs) {}
  ~OpNode() override { release_saved(); }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> ins(saved_inputs_.size()), outs(saved_outputs_.size());
    std::string who = op_.grad_name;
    for (size_t i = 0; i < ins.size(); ++i) ins[i] = saved_inputs_[i].unpack(who);
    for (size_t i = 0; i < outs.size(); ++i) outs[i] = saved_outputs_[i].unpack(who);
    // an integer output (max_pool2d's and max_dim's indices) never gets a gradient: no zeros are
    // made for it (they were max_pool2d's int64 fills, 2% of fmnist_cnn's step)
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() && is_floating(output_specs[i].second) &&
          !(i < 32 && (op_.unmaterialized_grads >> i & 1))) {
        auto& s = output_specs[i];
        grads[i] = zeros(s.first, TensorOptions(s.second).device(device_));
      }
    }
    std::vector<bool> needs(next_edges.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = next_edges[i].valid();
    BackwardContext ctx{ins, outs, grads, attrs_, input_specs_, needs};
    std::vector<Tensor> r = op_.backward(ctx);
    r.resize(next_edges.size());
    for (size_t i = 0; i < r.size(); ++i) {
      if (!needs[i])
        r[i] = Tensor();
      else if (r[i].defined() && r[i].dtype() != input_specs_[i].dtype)
        r[i] = cast(r[i], input_specs_[i].dtype);
    }
    return r;
  }
  std::string name() const override { return op_.grad_name; }
  std::string forward_info() const override {
    std::string s = op_.name + "(";
    for (size_t i = 0; i < input_specs_.size(); ++i) s += (i ? ", " : "") + shape_str(input_specs_[i].sizes);
    if (!attrs_.str().empty()) s += "; " + attrs_.str();
    return s + ")";
  }
  void release_saved() override {
    for (auto& s : saved_inputs_) s.reset();
    for (auto& s : saved_outputs_) s.reset();
  }

  const OpDef& op_;
  Attrs attrs_;
  Device device_;
  std::vector<TensorSpec> input_specs_;
  std::vector<SavedVariable> saved_inputs_, saved_outputs_;
};

void record_op(const OpDef& op, const Attrs& attrs, Device dev, const std::vector<Tensor>& inputs,
               std::vector<Tensor>& outputs) {
  auto node = std::make_shared<OpNode>(op, attrs);
  node->device_ = dev;
  node->next_edges.reserve(inputs.size());
  for (auto& t : inputs) {
    node->next_edges.push_back(t.requires_grad() ? gradient_edge(t) : Edge{});
    node->input_specs_.push_back({t.sizes(), t.dtype()});
  }
  for (auto& o : outputs) node->output_specs.push_back({o.sizes(), o.dtype()});
  if (op.save_inputs)
    for (uint32_t i = 0; i < inputs.size(); ++i)
      node->saved_inputs_.emplace_back(i < 32 && (op.unsaved_inputs >> i & 1) ? Tensor() : inputs[i], false);
  for (uint32_t i = 0; i < outputs.size(); ++i)
    if (is_floating(outputs[i].dtype())) set_history(outputs[i], node, i);
  if (op.save_outputs)
    for (size_t i = 0; i < outputs.size(); ++i)
      node->saved_outputs_.emplace_back(i < 32 && (op.unsaved_outputs >> i & 1) ? Tensor() : outputs[i], true);
}

[[maybe_unused]] const bool installed = [] {
  set_autograd_recorder(record_op);
  return true;
}();

}  // namespace

}  // namespace tr
