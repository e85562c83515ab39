#include "autograd/engine.h"
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include "ops/autocast.h"
#include "autograd/anomaly_mode.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace tr::autograd {

namespace {

struct NodeTask {
  Node* node;
  bool operator<(const NodeTask& o) const { return node->sequence_nr() < o.node->sequence_nr(); }
};

// Adds `g` into slot `i` of a node's input buffer (out of place, so create_graph keeps a graph).
void accumulate(std::vector<Tensor>& buf, size_t i, const Tensor& g) {
  if (!g.defined()) return;
  if (!buf[i].defined())
    buf[i] = g;
  else
    buf[i] = add(buf[i], g);
}

bool has_nan(const Tensor& t) {
  if (!t.defined() || !t.is_floating_point()) return false;
  NoGradGuard ng;
  return isnan(t).sum().item() > 0;
}

// An input of autograd::grad: the gradient arriving at slot `nr` of `node` is what grad returns.
struct Capture {
  Node* node;
  uint32_t nr;
};

// One call's walk over the graph. The engine keeps no state between calls, so a backward started
// inside a node's backward (activation checkpointing's recomputation) has a walk of its own.
class GraphWalk {
 public:
  GraphWalk(const std::vector<Capture>& captures, bool keep_graph)
      : capturing_for_grad_(!captures.empty()), keep_graph_(keep_graph), results_(captures.size()) {
    for (size_t i = 0; i < captures.size(); ++i) capture_at_[captures[i].node].push_back({captures[i].nr, i});
  }

  // true for autograd::grad: the captured inputs' gradients are returned, no .grad is touched, and
  // only the nodes on a path to a capture run.
  bool capturing_for_grad() const { return capturing_for_grad_; }

  // Finds every node reachable from the roots (iteratively: graphs can be deep) and counts the
  // incoming edges of each, so that a node runs once all its gradients have arrived.
  void count_dependencies(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    for (auto& e : roots) {
      if (owner_.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      discovery_order_.push_back(n);
      for (auto& e : n->next_edges) {
        if (!e.fn) continue;
        deps_[e.fn.get()]++;
        if (owner_.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
      }
    }
  }

  // Marks the nodes from which a capture can be reached: a fixed point over the reverse edges,
  // visiting children before parents (reverse topological order).
  void mark_nodes_leading_to_captures() {
    std::unordered_map<Node*, int> indeg;
    for (auto* n : discovery_order_) indeg[n] = 0;
    for (auto* n : discovery_order_)
      for (auto& e : n->next_edges)
        if (e.fn) indeg[e.fn.get()]++;
    std::vector<Node*> topo, q;
    for (auto* n : discovery_order_)
      if (indeg[n] == 0) q.push_back(n);
    while (!q.empty()) {
      Node* n = q.back();
      q.pop_back();
      topo.push_back(n);
      for (auto& e : n->next_edges)
        if (e.fn && --indeg[e.fn.get()] == 0) q.push_back(e.fn.get());
    }
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      if (capture_at_.count(n) > 0 || leads_to_needed(n)) needed_.insert(n);
    }
  }

  // Puts the roots' incoming gradients in their buffers and queues the roots nothing points to.
  void seed_roots(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads) {
    for (size_t i = 0; i < roots.size(); ++i)
      accumulate(buffer_of(roots[i].fn.get()), roots[i].input_nr, root_grads[i]);
    for (auto& e : roots) {
      Node* n = e.fn.get();
      if (deps_[n] == 0 && queued_.insert(n).second) ready_.push({n});
    }
  }

  // Runs the ready nodes in order of decreasing sequence number (the reverse of creation), each
  // once all its incoming gradients have arrived; returns the captured gradients.
  std::vector<Tensor> run_nodes_in_reverse_creation_order() {
    while (!ready_.empty()) {
      Node* n = ready_.top().node;
      ready_.pop();
      std::vector<Tensor> inputs = std::move(buffer_of(n));
      buffers_.erase(n);
      run_pre_hooks(*n, inputs);
      capture_gradients(n, inputs);
      std::vector<Tensor> outputs;
      if (should_apply(n)) outputs = apply(*n, std::move(inputs));
      send_to_next_nodes(*n, outputs);
    }
    return std::move(results_);
  }

 private:
  std::vector<Tensor>& buffer_of(Node* n) {
    auto it = buffers_.find(n);
    if (it == buffers_.end()) it = buffers_.emplace(n, std::vector<Tensor>(n->num_outputs())).first;
    return it->second;
  }

  bool leads_to_needed(Node* n) const {
    for (auto& e : n->next_edges)
      if (e.fn && needed_.count(e.fn.get())) return true;
    return false;
  }

  static void run_pre_hooks(Node& n, std::vector<Tensor>& inputs) {
    for (auto& [nr, hooks] : n.pre_hooks) {
      if (nr >= inputs.size() || !inputs[nr].defined()) continue;
      for (auto& [id, hook] : hooks) {
        Tensor r = hook(inputs[nr]);
        if (r.defined()) inputs[nr] = r;
      }
    }
  }

  void capture_gradients(Node* n, const std::vector<Tensor>& inputs) {
    auto cap = capture_at_.find(n);
    if (cap != capture_at_.end())
      for (auto [nr, idx] : cap->second) results_[idx] = inputs[nr];
  }

  bool should_apply(Node* n) const {
    if (!capturing_for_grad_) return true;
    if (!needed_.count(n) || dynamic_cast<AccumulateGrad*>(n)) return false;  // leaves are left alone
    // A captured node runs only if something beyond it is also needed.
    if (capture_at_.count(n)) return leads_to_needed(n);
    return true;
  }

  // The node's backward on its incoming gradients (skipped when none arrived).
  std::vector<Tensor> apply(Node& n, std::vector<Tensor> inputs) const {
    std::vector<Tensor> outputs;
    bool any = false;
    for (auto& t : inputs) any = any || t.defined();
    if (any) {
      outputs = n.apply(std::move(inputs));
      if (AnomalyMode::is_enabled()) {
        for (size_t i = 0; i < outputs.size(); ++i)
          TR_CHECK(!has_nan(outputs[i]), "Function '", n.name(), "' returned nan values in its ", i,
                   "th output (forward: ", n.forward_info(), ")");
      }
    }
    if (!keep_graph_) n.release_saved();
    return outputs;
  }

  // Adds each output gradient into the buffer of the node its edge leads to, and queues the nodes
  // whose last gradient this was.
  void send_to_next_nodes(Node& n, const std::vector<Tensor>& outputs) {
    for (size_t i = 0; i < n.next_edges.size(); ++i) {
      const Edge& e = n.next_edges[i];
      if (!e.fn) continue;
      Node* c = e.fn.get();
      if (i < outputs.size() && outputs[i].defined()) {
        const auto& spec = c->output_specs[e.input_nr];
        const Tensor& g = outputs[i];
        TR_CHECK(g.sizes() == spec.first, "Function ", n.name(), " returned an invalid gradient at index ", i,
                 ": got shape ", g.sizes(), " but expected shape ", spec.first);
        accumulate(buffer_of(c), e.input_nr, g);
      }
      if (--deps_[c] == 0 && (!capturing_for_grad_ || needed_.count(c)) && queued_.insert(c).second) ready_.push({c});
    }
  }

  const bool capturing_for_grad_;
  const bool keep_graph_;
  std::unordered_map<Node*, int> deps_;                     // incoming edges not yet run
  std::unordered_map<Node*, std::shared_ptr<Node>> owner_;  // keeps the nodes alive during the walk
  std::vector<Node*> discovery_order_;
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> capture_at_;  // node -> (nr, result idx)
  std::unordered_set<Node*> needed_;                        // capturing for grad: the nodes that lead to a capture
  std::unordered_map<Node*, std::vector<Tensor>> buffers_;  // each waiting node's incoming gradients
  std::priority_queue<NodeTask> ready_;
  std::unordered_set<Node*> queued_;
  std::vector<Tensor> results_;  // the captured gradients, in the order of the captures
};

// Runs the graph rooted at `roots` (edges with their incoming gradients). With captures
// (autograd::grad), only the nodes on a path to a capture run and leaves are left alone.
std::vector<Tensor> run(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool keep_graph,
                        bool create_graph, const std::vector<Capture>& captures) {
  GraphWalk walk(captures, keep_graph);
  walk.count_dependencies(roots);
  if (walk.capturing_for_grad()) walk.mark_nodes_leading_to_captures();
  walk.seed_roots(roots, root_grads);
  AutoGradMode mode(create_graph);
  amp::AutocastExcludeGuard no_autocast;  // backward ops run in the dtypes the forward chose
  return walk.run_nodes_in_reverse_creation_order();
}

std::vector<Edge> root_edges(const std::vector<Tensor>& tensors, const char* what) {
  std::vector<Edge> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Edge e = gradient_edge(tensors[i]);
    TR_CHECK(e.valid(), what, ": element ", i, " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(e);
  }
  return roots;
}

std::vector<Tensor> make_root_grads(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                                    const char* what) {
  TR_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), what, ": got ", grad_outputs.size(),
           " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& o = outputs[i];
    if (!grad_outputs.empty() && grad_outputs[i].defined()) {
      const Tensor& g = grad_outputs[i];
      TR_CHECK(g.sizes() == o.sizes(), what, ": grad_outputs[", i, "] has shape ", g.sizes(),
               " but the output has shape ", o.sizes());
      grads.push_back(g);
    } else {
      TR_CHECK(o.numel() == 1, what, ": grad can be implicitly created only for scalar outputs, but output ", i,
               " has shape ", o.sizes(), "; pass grad_outputs");
      grads.push_back(ones_like(o));
    }
  }
  return grads;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors, bool retain_graph,
              bool create_graph) {
  auto roots = root_edges(tensors, "backward");
  auto grads = make_root_grads(tensors, grad_tensors, "backward");
  run(roots, grads, retain_graph || create_graph, create_graph, {});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  auto roots = root_edges(outputs, "grad");
  auto grads = make_root_grads(outputs, grad_outputs, "grad");
  std::vector<Capture> caps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TR_CHECK(inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    caps.push_back({e.fn.get(), e.input_nr});
  }
  auto res = run(roots, grads, retain_graph.value_or(create_graph), create_graph, caps);
  for (size_t i = 0; i < res.size(); ++i) {
    TR_CHECK(res[i].defined() || allow_unused, "grad: one of the differentiated tensors (input ", i,
             ") appears to not have been used in the graph; set allow_unused=true if this is the desired behavior");
  }
  return res;
}

}  // namespace tr::autograd
