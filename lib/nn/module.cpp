#include "nn/module.h"
#include "nn/activation_checkpoint.h"
#include <set>
#include <sstream>
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {
int next_hook_handle() {
  static int h = 0;
  return ++h;
}
std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}
void check_name(const std::string& name, const char* what) {
  TR_CHECK(!name.empty() && name.find('.') == std::string::npos, what, " name '", name,
           "' must be non-empty and contain no '.'");
}
}  // namespace

Tensor Module::forward(const Tensor&) {
  throw Error(str(type_name_, ": forward(Tensor) is not implemented for this module"));
}
Tensor Module::forward(const std::vector<Tensor>& xs) {
  TR_CHECK(xs.size() == 1, type_name_, ": expected 1 input, got ", xs.size());
  return forward(xs[0]);
}

Tensor Module::operator()(const Tensor& x) {
  if (pre_hooks_.empty() && hooks_.empty() && !checkpoint_) return forward(x);
  return (*this)(std::vector<Tensor>{x});
}

Tensor Module::call_forward(const std::vector<Tensor>& xs) { return xs.size() == 1 ? forward(xs[0]) : forward(xs); }

Tensor Module::operator()(const std::vector<Tensor>& xs) {
  std::vector<Tensor> in = xs;
  for (auto& [id, h] : pre_hooks_) {
    auto r = h(*this, in);
    if (!r.empty()) in = std::move(r);
  }
  Tensor out = checkpoint_ ? checkpoint_forward(*this, in) : call_forward(in);
  for (auto& [id, h] : hooks_) {
    Tensor r = h(*this, in, out);
    if (r.defined()) out = r;
  }
  return out;
}

void Module::register_parameter(const std::string& name, Tensor& field, bool requires_grad) {
  check_name(name, "parameter");
  for (auto& p : params_) TR_CHECK(p.name != name, type_name_, ": parameter '", name, "' already exists");
  if (field.defined() && requires_grad && !field.requires_grad()) field.requires_grad_(true);
  params_.push_back({name, &field});
}

void Module::tie_parameter(const std::string& name, const Tensor& shared) {
  for (auto& p : params_) {
    if (p.name != name) continue;
    const Tensor& mine = *p.slot;
    TR_CHECK(shared.defined(), type_name_, ": cannot tie parameter '", name, "' to an undefined tensor");
    TR_CHECK(!mine.defined() || (mine.sizes() == shared.sizes() && mine.dtype() == shared.dtype()), type_name_,
             ": cannot tie parameter '", name, "' of shape ", mine.sizes(), " (", dtype_name(mine.dtype()),
             ") to a tensor of shape ", shared.sizes(), " (", dtype_name(shared.dtype()), ")");
    *p.slot = shared;
    return;
  }
  throw Error(str(type_name_, " has no parameter '", name, "' to tie"));
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_name(name, "buffer");
  for (auto& b : buffers_) TR_CHECK(b.name != name, type_name_, ": buffer '", name, "' already exists");
  buffers_.push_back({name, t, persistent});
  return buffers_.back().t;
}

void Module::add_child(const std::string& name, ModulePtr m) {
  check_name(name, "module");
  for (auto& [n, c] : children_) {
    if (n == name) {
      c = std::move(m);
      return;
    }
  }
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, bool persistent_only,
                     NamedTensors& out) const {
  if (params)
    for (auto& p : params_)
      if (p.slot->defined()) out.emplace_back(prefix + p.name, *p.slot);
  if (buffers)
    for (auto& b : buffers_)
      if (b.t.defined() && (b.persistent || !persistent_only)) out.emplace_back(prefix + b.name, b.t);
  for (auto& [n, c] : children_)
    if (c) c->collect(prefix + n + ".", params, buffers, persistent_only, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  if (!recurse) {
    for (auto& p : params_)
      if (p.slot->defined()) out.emplace_back(p.name, *p.slot);
    return out;
  }
  collect("", true, false, false, out);
  // a parameter shared by two modules is listed once, under its first name (as torch)
  std::set<TensorImpl*> seen;
  NamedTensors uniq;
  for (auto& p : out)
    if (seen.insert(p.second.impl()).second) uniq.push_back(p);
  return uniq;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> r;
  for (auto& [n, t] : named_parameters(recurse)) r.push_back(t);
  return r;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  if (!recurse) {
    for (auto& b : buffers_)
      if (b.t.defined()) out.emplace_back(b.name, b.t);
    return out;
  }
  collect("", false, true, false, out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::vector<std::pair<std::string, Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [p, m] = stack.back();
    stack.pop_back();
    out.emplace_back(p, m);
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it)
      if (it->second) stack.emplace_back(p.empty() ? it->first : p + "." + it->first, it->second.get());
  }
  return out;
}

ModulePtr Module::get_submodule(const std::string& path) const {
  TR_CHECK(!path.empty(), "get_submodule: empty path");
  const Module* cur = this;
  ModulePtr found;
  std::string walked;
  for (auto& part : split_path(path)) {
    found.reset();
    for (auto& [n, c] : cur->children_)
      if (n == part) found = c;
    TR_CHECK(found, "get_submodule('", path, "'): ", cur->type_name_, walked.empty() ? "" : " at '" + walked + "'",
             " has no submodule '", part, "'");
    walked += (walked.empty() ? "" : ".") + part;
    cur = found.get();
  }
  return found;
}

void Module::set_submodule(const std::string& path, ModulePtr m) {
  auto parts = split_path(path);
  std::string last = parts.back();
  parts.pop_back();
  Module* parent = this;
  if (!parts.empty()) {
    std::string pp;
    for (size_t i = 0; i < parts.size(); ++i) pp += (i ? "." : "") + parts[i];
    parent = get_submodule(pp).get();
  }
  bool exists = false;
  for (auto& [n, c] : parent->children_) exists = exists || n == last;
  TR_CHECK(exists, "set_submodule('", path, "'): ", parent->type_name_, " has no submodule '", last, "'");
  parent->add_child(last, std::move(m));
}

Tensor& Module::tensor(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return *p.slot;
  for (auto& b : buffers_)
    if (b.name == name) return b.t;
  throw Error(str(type_name_, " has no parameter or buffer '", name, "'"));
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_)
    if (c) c->train(on);
  return *this;
}

StateDict Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, true, out);
  for (auto& [n, t] : out) t = t.detach();
  return out;
}

LoadResult Module::load_state_dict(const StateDict& sd, bool strict) {
  NamedTensors mine;
  collect("", true, true, true, mine);
  std::map<std::string, const Tensor*> given;
  for (auto& [n, t] : sd) given[n] = &t;
  LoadResult r;
  std::set<std::string> used;
  // A tied parameter is loaded once it is given under any of its names (a file written without
  // aliases, as safetensors' save_model writes one, holds only the first).
  std::set<TensorImpl*> given_impls;
  for (auto& [n, t] : mine)
    if (given.count(n)) given_impls.insert(t.impl());
  for (auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it == given.end()) {
      if (!given_impls.count(t.impl())) r.missing_keys.push_back(n);
      continue;
    }
    used.insert(n);
    const Tensor& src = *it->second;
    TR_CHECK(src.sizes() == t.sizes(), "load_state_dict: size mismatch for ", n, ": copying a param with shape ",
             src.sizes(), " from the checkpoint, the shape in the current model is ", t.sizes());
  }
  for (auto& [n, t] : sd)
    if (!used.count(n)) r.unexpected_keys.push_back(n);
  if (strict && (!r.missing_keys.empty() || !r.unexpected_keys.empty())) {
    std::string msg = "Error(s) in loading state_dict for " + type_name_ + ":";
    if (!r.missing_keys.empty()) msg += " missing key(s): " + str(r.missing_keys) + ".";
    if (!r.unexpected_keys.empty()) msg += " unexpected key(s): " + str(r.unexpected_keys) + ".";
    throw Error(msg);
  }
  NoGradGuard ng;
  for (auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it != given.end()) t.detach().copy_(*it->second);
  }
  return r;
}

bool same_tensor_data(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}

StateDict without_aliases(const StateDict& sd) {
  StateDict out;
  for (auto& [n, t] : sd) {
    bool alias = false;
    for (auto& [m, u] : out) alias = alias || same_tensor_data(t, u);
    if (!alias) out.emplace_back(n, t);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Module::tied_parameters() const {
  NamedTensors all;
  collect("", true, false, false, all);
  std::vector<std::pair<std::string, std::string>> ties;
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (all[i].second.is_same(all[j].second)) {
        ties.emplace_back(all[i].first, all[j].first);
        break;
      }
  return ties;
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) p.zero_grad(set_to_none);
}

void set_data(Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.impl();
  d->storage = src.impl()->storage;
  d->sizes = src.sizes();
  d->strides = src.strides();
  d->offset = src.storage_offset();
  d->dtype = src.dtype();
}

Module& Module::to(Device dev) {
  NoGradGuard ng;
  NamedTensors all;
  collect("", true, true, false, all);
  for (auto& [n, t] : all) {
    if (t.device() == dev) continue;
    Tensor moved = t.detach().to(dev);
    set_data(t, moved);
    if (t.grad().defined()) t.set_grad(t.grad().to(dev));
  }
  return *this;
}

Module& Module::to(DType dt) {
  NoGradGuard ng;
  NamedTensors all;
  collect("", true, true, false, all);
  for (auto& [n, t] : all) {
    if (!t.is_floating_point() || t.dtype() == dt) continue;  // as torch: only floating tensors are cast
    set_data(t, t.detach().to(dt));
    t.set_grad(Tensor());
  }
  return *this;
}

int Module::register_forward_pre_hook(ForwardPreHook h) {
  int id = next_hook_handle();
  pre_hooks_.emplace_back(id, std::move(h));
  return id;
}
int Module::register_forward_hook(ForwardHook h) {
  int id = next_hook_handle();
  hooks_.emplace_back(id, std::move(h));
  return id;
}
void Module::remove_hook(int handle) {
  std::erase_if(pre_hooks_, [&](auto& p) { return p.first == handle; });
  std::erase_if(hooks_, [&](auto& p) { return p.first == handle; });
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& p : parameters()) n += p.numel();
  return n;
}

void Module::repr_into(std::string& s, int indent) const {
  s += type_name_ + "(";
  if (children_.empty()) {
    s += extra_repr() + ")";
    return;
  }
  std::string pad(size_t(indent + 2), ' ');
  if (!extra_repr().empty()) s += "\n" + pad + extra_repr();
  for (auto& [n, c] : children_) {
    s += "\n" + pad + "(" + n + "): ";
    if (c)
      c->repr_into(s, indent + 2);
    else
      s += "None";
  }
  s += "\n" + std::string(size_t(indent), ' ') + ")";
}

std::string Module::repr() const {
  std::string s;
  repr_into(s, 0);
  return s;
}

}  // namespace tr::nn
