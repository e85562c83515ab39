// CheckpointBackward: the graph node of a checkpointed module call, and the policies of
// [model] activation_checkpointing.
#include "nn/activation_checkpoint.h"
#include <memory>
#include <unordered_set>
#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "nn/layers/transformer_block.h"
#include "ops/autocast.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

// The module's buffers (BatchNorm's running stats and num_batches_tracked) as they were before the
// recomputation, put back after it: a checkpointed module updates them once per forward, as
// without checkpointing. torch's checkpoint runs the forward's side effects again and updates them
// twice; we don't. Only buffers the recomputation wrote (their version moved) are copied back.
class BufferSnapshot {
 public:
  explicit BufferSnapshot(Module& m) {
    NoGradGuard ng;
    for (auto& [name, b] : m.named_buffers()) saved_.push_back({b, b.clone(), b.version()});
  }
  void restore() {
    NoGradGuard ng;
    for (auto& s : saved_)
      if (s.live.version() != s.version) s.live.copy_(s.value);
  }

 private:
  struct Saved {
    Tensor live;   // the module's buffer (shares its storage)
    Tensor value;  // its value before the recomputation
    uint64_t version;
  };
  std::vector<Saved> saved_;
};

// Whether a walk up the graph from `from` meets one of `targets` (iterative: graphs are deep).
bool reaches(const std::vector<Edge>& from, const std::unordered_set<const Node*>& targets) {
  std::vector<const Node*> stack;
  std::unordered_set<const Node*> seen;
  for (auto& e : from)
    if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (targets.count(n)) return true;
    for (auto& e : n->next_edges)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  return false;
}

// The backward of one checkpointed call: next_edges are the forward's inputs (an empty edge for
// one that needs no gradient), then the module's parameters that require grad. Returning the
// parameters' gradients along edges (rather than calling backward() inside, as torch's re-entrant
// checkpoint does) lets the outer engine accumulate them into .grad with their post-accumulate
// hooks (DDP's), and makes autograd::grad and gradcheck work through a checkpoint.
class CheckpointBackward : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "CheckpointBackward"; }
  std::string forward_info() const override { return "checkpoint of " + module_->type_name(); }
  void release_saved() override {
    for (auto& s : inputs_) s.reset();
    released_ = true;
  }

  std::shared_ptr<Module> owner_;  // keeps the module alive; empty when no shared_ptr owns it
  Module* module_ = nullptr;
  std::vector<SavedVariable> inputs_;  // saved before the forward: an in-place change is an error
  std::vector<bool> input_requires_grad_;
  std::vector<Tensor> params_;  // the parameters with an edge, in edge order
  GeneratorState rng_;          // the default generator's state when the forward started
  amp::AutocastState autocast_;
  bool released_ = false;
};

std::vector<Tensor> CheckpointBackward::apply(std::vector<Tensor>&& grads) {
  TR_CHECK(!released_, "checkpoint of ", module_->type_name(), ": trying to backward through the graph a second ",
           "time, but the saved inputs were freed; specify retain_graph=true the first time");
  // create_graph: the engine runs nodes with grad mode on; the gradients keep their graph then.
  const bool create_graph = GradMode::is_enabled();

  // (b) the inputs again, detached: the recomputed graph ends at them, so autograd::grad below
  // walks the block only. With create_graph the inputs keep their history instead: the
  // gradients' graph must reach the real inputs for double backward (torch's re-entrant
  // checkpoint cannot do that); grad() still stops at them, only its discovery walks further.
  std::vector<Tensor> in;
  std::vector<Tensor> wrt;  // what gradients are asked for: inputs needing one, then parameters
  for (size_t i = 0; i < inputs_.size(); ++i) {
    Tensor x = inputs_[i].unpack(name());
    if (x.defined() && !(create_graph && input_requires_grad_[i])) {
      x = x.detach();
      if (input_requires_grad_[i]) x.requires_grad_(true);
    }
    if (input_requires_grad_[i]) wrt.push_back(x);
    in.push_back(x);
  }
  wrt.insert(wrt.end(), params_.begin(), params_.end());
  if (create_graph && !params_.empty()) {
    // grad() below would also follow the inputs' history back to a parameter used before the
    // checkpoint and count that path's gradient here as well as in the outer walk
    std::unordered_set<const Node*> accumulators;
    for (size_t j = 0; j < params_.size(); ++j) accumulators.insert(next_edges[inputs_.size() + j].fn.get());
    std::vector<Edge> from(next_edges.begin(), next_edges.begin() + std::ptrdiff_t(inputs_.size()));
    TR_CHECK(!reaches(from, accumulators), "checkpoint of ", module_->type_name(), ": double backward (create_graph) ",
             "through a checkpoint whose parameters are also used before it is not supported");
  }

  // (a) the generator back where the forward found it, (d) and forward again after the backward;
  // the buffers likewise. Restored on the error path too.
  Generator& gen = default_generator();
  const GeneratorState now = gen.get_state();
  BufferSnapshot buffers(*module_);
  auto restore = [&] {
    gen.set_state(now);
    buffers.restore();
  };
  std::vector<Tensor> g;
  try {
    gen.set_state(rng_);
    Tensor out;
    {
      AutoGradMode grad_on(true);
      amp::AutocastStateGuard autocast(autocast_);  // torch re-enters the forward's autocast too
      FlopCounter::Pause uncounted;                 // MFU counts the model's FLOPs, not the recomputation
      out = module_->call_forward(in);
    }
    const auto& spec = output_specs[0];
    TR_CHECK(out.defined() && out.sizes() == spec.first && out.dtype() == spec.second, "checkpoint of ",
             module_->type_name(), ": the recomputed output (", out.defined() ? dtype_name(out.dtype()) : "undefined",
             ", shape ", out.defined() ? out.sizes() : Shape{}, ") differs from the forward's (",
             dtype_name(spec.second), ", shape ", spec.first, "); a checkpointed forward must repeat itself");
    // (c) the incoming gradient through the recomputed graph
    if (out.requires_grad() && !wrt.empty())
      g = autograd::grad({out}, wrt, {grads[0]}, create_graph, create_graph, /*allow_unused=*/true);
  } catch (...) {
    restore();
    throw;
  }
  restore();

  // (e) one gradient per edge: inputs (none where not needed), then parameters
  std::vector<Tensor> result(next_edges.size());
  size_t k = 0;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (input_requires_grad_[i] && k < g.size()) result[i] = g[k++];
  for (size_t j = 0; j < params_.size() && k < g.size(); ++j) result[inputs_.size() + j] = g[k++];
  return result;
}

}  // namespace

Tensor checkpoint_forward(Module& m, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> params;
  bool needs = false;
  if (GradMode::is_enabled()) {
    for (auto& x : inputs) needs = needs || (x.defined() && x.requires_grad());
    for (auto& p : m.parameters())
      if (p.requires_grad()) params.push_back(p);
    needs = needs || !params.empty();
  }
  if (!needs) return m.call_forward(inputs);

  auto node = std::make_shared<CheckpointBackward>();
  node->owner_ = m.weak_from_this().lock();
  node->module_ = &m;
  node->rng_ = default_generator().get_state();
  node->autocast_ = amp::current_autocast_state();
  for (auto& x : inputs) {
    node->inputs_.emplace_back(x, false);
    node->input_requires_grad_.push_back(x.defined() && x.requires_grad());
  }
  Tensor out;
  {
    NoGradGuard ng;
    out = m.call_forward(inputs);
  }
  if (!out.defined() || !out.is_floating_point()) return out;  // nothing to differentiate
  // Its own handle, so the history never lands on an input or a parameter the forward returned.
  out = out.detach();

  for (size_t i = 0; i < inputs.size(); ++i)
    node->next_edges.push_back(node->input_requires_grad_[i] ? gradient_edge(inputs[i]) : Edge{});
  for (auto& p : params) node->next_edges.push_back(gradient_edge(p));
  node->params_ = std::move(params);
  node->output_specs.push_back({out.sizes(), out.dtype()});
  set_history(out, node, 0);
  return out;
}

const std::vector<std::string>& activation_checkpointing_policies() {
  static const std::vector<std::string> p{"none", "blocks"};
  return p;
}

int64_t apply_activation_checkpointing(Module& root, const std::string& policy, const std::string& where) {
  TR_CHECK(policy == "none" || policy == "blocks", where, ": activation_checkpointing = \"", policy,
           "\" is not a policy (known: ", activation_checkpointing_policies(), ")");
  if (policy == "none") return 0;
  int64_t n = 0;
  for (auto& [path, m] : root.named_modules()) {
    if (dynamic_cast<TransformerBlock*>(m) == nullptr) continue;
    m->set_activation_checkpointing(true);
    ++n;
  }
  TR_CHECK(n > 0, where, ": activation_checkpointing = \"blocks\" checkpoints every transformer_block, but the model ",
           "has none; mark layers with checkpoint = true in the model file instead");
  return n;
}

}  // namespace tr::nn
