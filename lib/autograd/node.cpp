#include "autograd/node.h"
#include <atomic>
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
std::atomic<int> hook_counter{0};

// Nodes whose last owner is being destroyed are parked here and destroyed by the outermost
// ~Node, so that freeing a 100k-node chain does not recurse 100k deep.
thread_local std::vector<std::shared_ptr<Node>> pending_release;
thread_local bool draining = false;
}  // namespace

int next_hook_id() { return ++hook_counter; }

Node::Node() : sequence_nr_(next_sequence_nr++) {}

void defer_release(std::shared_ptr<Node>& p) {
  if (p && p.use_count() == 1) pending_release.push_back(std::move(p));
  p.reset();
}

void defer_release_tensor(Tensor& t) {
  if (t.defined() && t.impl_ptr().use_count() == 1 && t.impl()->autograd) defer_release(t.impl()->autograd->grad_fn);
  t = Tensor();
}

Node::~Node() {
  for (auto& e : next_edges) defer_release(e.fn);
  if (draining) return;
  draining = true;
  while (!pending_release.empty()) {
    std::shared_ptr<Node> n = std::move(pending_release.back());
    pending_release.pop_back();
    n.reset();
  }
  draining = false;
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {
  sequence_nr_ = UINT64_MAX;  // runs as soon as it is ready, as in torch
  output_specs.push_back({leaf->sizes, leaf->dtype});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  auto impl = leaf_.lock();
  if (!impl || !grads[0].defined()) return {};
  Tensor leaf(impl);
  Tensor g = grads[0];
  AutogradMeta& m = *impl->autograd;
  if (!m.grad.defined()) {
    // Take the incoming buffer when nobody else can see it; otherwise copy. A view qualifies when
    // it covers its whole storage and holds the only reference to it (e.g. the transpose that a
    // matrix product's backward returns for W^T): the grad becomes a plain tensor on that storage.
    const bool sole_view = g.impl()->is_view && g.storage().use_count() == 1 && g.storage_offset() == 0 &&
                           size_t(g.numel()) * itemsize(g.dtype()) == g.storage()->nbytes();
    bool steal = !GradMode::is_enabled() && g.impl_ptr().use_count() <= 2 && g.is_contiguous() &&
                 (!g.impl()->is_view || sole_view) && !g.requires_grad();
    if (steal && g.impl()->is_view) {
      g = g.detach();
      g.impl()->is_view = false;
    }
    m.grad = steal ? g : (GradMode::is_enabled() ? g.clone() : g.detach().clone());
  } else if (GradMode::is_enabled()) {
    m.grad = add(m.grad, g);  // create_graph: keep the graph of the accumulated gradient
  } else {
    m.grad.add_(g);
  }
  for (auto& [id, hook] : post_hooks) hook(leaf);
  return {};
}

int register_post_accumulate_grad_hook(const Tensor& param, std::function<void(Tensor&)> hook) {
  TR_CHECK(param.requires_grad() && param.is_leaf(),
           "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad");
  auto acc = std::static_pointer_cast<AccumulateGrad>(gradient_edge(param).fn);
  int id = next_hook_id();
  acc->post_hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_post_accumulate_grad_hook(const Tensor& param, int handle) {
  Edge e = gradient_edge(param);
  if (!e.fn) return;
  auto& hooks = std::static_pointer_cast<AccumulateGrad>(e.fn)->post_hooks;
  std::erase_if(hooks, [&](auto& h) { return h.first == handle; });
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t.autograd_meta();
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  if (!m->grad_accumulator) m->grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return {m->grad_accumulator, 0};
}

void set_history(Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta& m = t.mutable_autograd_meta();
  m.requires_grad = true;
  m.grad_fn = fn;
  m.output_nr = output_nr;
}

}  // namespace tr
