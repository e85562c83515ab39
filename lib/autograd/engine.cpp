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
  if (!buf[i].defined()) buf[i] = g;
  else buf[i] = add(buf[i], g);
}

bool has_nan(const Tensor& t) {
  if (!t.defined() || !t.is_floating_point()) return false;
  NoGradGuard ng;
  return isnan(t).sum().item() > 0;
}

struct Capture {
  Node* node;
  uint32_t nr;
};

// Runs the graph rooted at `roots` (edges with their incoming gradients). When `captures` is
// non-empty (autograd::grad), only the nodes on a path to a capture run and leaves are left alone.
std::vector<Tensor> run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool keep_graph,
                        bool create_graph, const std::vector<Capture>& captures) {
  // 1. Discover the graph iteratively; count dependencies (incoming edges) per node.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> owner;  // keep nodes alive during the run
  std::vector<Node*> stack;
  for (auto& e : roots) {
    if (owner.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
  }
  std::vector<Node*> order;  // discovery order
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (auto& e : n->next_edges) {
      if (!e.fn) continue;
      deps[e.fn.get()]++;
      if (owner.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    }
  }

  // 2. With captures, mark the nodes that lead to one (a fixed point over the reverse edges).
  const bool grad_mode_call = !captures.empty();
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> capture_at;  // node -> (nr, result idx)
  for (size_t i = 0; i < captures.size(); ++i) capture_at[captures[i].node].push_back({captures[i].nr, i});
  if (grad_mode_call) {
    // Process nodes in reverse topological order: children before parents.
    std::unordered_map<Node*, int> indeg;
    for (auto* n : order) indeg[n] = 0;
    for (auto* n : order)
      for (auto& e : n->next_edges) if (e.fn) indeg[e.fn.get()]++;
    std::vector<Node*> topo, q;
    for (auto* n : order) if (indeg[n] == 0) q.push_back(n);
    while (!q.empty()) {
      Node* n = q.back();
      q.pop_back();
      topo.push_back(n);
      for (auto& e : n->next_edges)
        if (e.fn && --indeg[e.fn.get()] == 0) q.push_back(e.fn.get());
    }
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      bool need = capture_at.count(n) > 0;
      for (auto& e : n->next_edges) if (e.fn && needed.count(e.fn.get())) need = true;
      if (need) needed.insert(n);
    }
  }

  // 3. Execute in order of decreasing sequence number once all inputs have arrived.
  std::vector<Tensor> results(captures.size());
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto buffer_of = [&](Node* n) -> std::vector<Tensor>& {
    auto it = buffers.find(n);
    if (it == buffers.end()) it = buffers.emplace(n, std::vector<Tensor>(n->num_outputs())).first;
    return it->second;
  };
  for (size_t i = 0; i < roots.size(); ++i) accumulate(buffer_of(roots[i].fn.get()), roots[i].input_nr, root_grads[i]);

  std::priority_queue<NodeTask> ready;
  std::unordered_set<Node*> queued;
  for (auto& e : roots) {
    Node* n = e.fn.get();
    if (deps[n] == 0 && queued.insert(n).second) ready.push({n});
  }

  AutoGradMode mode(create_graph);
  amp::AutocastExcludeGuard no_autocast;  // backward ops run in the dtypes the forward chose
  while (!ready.empty()) {
    Node* n = ready.top().node;
    ready.pop();
    std::vector<Tensor> inputs = std::move(buffer_of(n));
    buffers.erase(n);

    for (auto& [nr, hooks] : n->pre_hooks) {
      if (nr >= inputs.size() || !inputs[nr].defined()) continue;
      for (auto& [id, hook] : hooks) {
        Tensor r = hook(inputs[nr]);
        if (r.defined()) inputs[nr] = r;
      }
    }
    auto cap = capture_at.find(n);
    if (cap != capture_at.end())
      for (auto [nr, idx] : cap->second) results[idx] = inputs[nr];

    bool execute = grad_mode_call ? (needed.count(n) && !dynamic_cast<AccumulateGrad*>(n)) : true;
    if (grad_mode_call && needed.count(n) && capture_at.count(n)) {
      // A captured node runs only if something beyond it is also needed.
      bool beyond = false;
      for (auto& e : n->next_edges) if (e.fn && needed.count(e.fn.get())) beyond = true;
      execute = execute && beyond;
    }
    std::vector<Tensor> outputs;
    if (execute) {
      bool any = false;
      for (auto& t : inputs) any = any || t.defined();
      if (any) {
        outputs = n->apply(std::move(inputs));
        if (AnomalyMode::is_enabled()) {
          for (size_t i = 0; i < outputs.size(); ++i)
            TR_CHECK(!has_nan(outputs[i]), "Function '", n->name(), "' returned nan values in its ", i,
                     "th output (forward: ", n->forward_info(), ")");
        }
      }
      if (!keep_graph) n->release_saved();
    }

    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn) continue;
      Node* c = e.fn.get();
      if (i < outputs.size() && outputs[i].defined()) {
        const auto& spec = c->output_specs[e.input_nr];
        const Tensor& g = outputs[i];
        TR_CHECK(g.sizes() == spec.first, "Function ", n->name(), " returned an invalid gradient at index ", i,
                 ": got shape ", g.sizes(), " but expected shape ", spec.first);
        accumulate(buffer_of(c), e.input_nr, g);
      }
      if (--deps[c] == 0 && (!grad_mode_call || needed.count(c)) && queued.insert(c).second) ready.push({c});
    }
  }
  return results;
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
