// nn::Module: parameters, buffers and child modules with dotted names (PyTorch's state_dict
// keys), train/eval mode, state_dict / load_state_dict, and forward hooks.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "core/tensor.h"

namespace tr::nn {

class Module;
using ModulePtr = std::shared_ptr<Module>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;  // ordered as registered, like torch's OrderedDict

// Returns replacement inputs (or an empty vector to keep them).
using ForwardPreHook = std::function<std::vector<Tensor>(Module&, const std::vector<Tensor>& inputs)>;
// Returns a replacement output (or an undefined tensor to keep it).
using ForwardHook = std::function<Tensor(Module&, const std::vector<Tensor>& inputs, const Tensor& output)>;

struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// enable_shared_from_this: a checkpointed module's backward node keeps the module alive
// (nn/activation_checkpoint.h) when it is owned by a shared_ptr, as modules normally are.
class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- forward ----
  // Single-input modules override forward(x); multi-input ones override forward(xs).
  virtual Tensor forward(const Tensor& x);
  virtual Tensor forward(const std::vector<Tensor>& xs);
  // Runs pre-hooks, forward (checkpointed when activation checkpointing is on) and hooks.
  Tensor operator()(const Tensor& x);
  Tensor operator()(const std::vector<Tensor>& xs);
  // forward(xs[0]) or forward(xs) as the inputs' count says: the call without hooks or
  // checkpointing, which is what a checkpoint recomputes.
  Tensor call_forward(const std::vector<Tensor>& xs);

  // ---- activation checkpointing (torch.utils.checkpoint) ----
  // On: operator() runs forward without keeping its activations and recomputes them during
  // backward (nn/activation_checkpoint.h); results are bit-identical. A flag rather than a
  // wrapper module, so state_dict names do not change (torch's checkpoint_wrapper adds
  // "_checkpoint_wrapped_module."). Hooks run outside the checkpoint, once per call.
  void set_activation_checkpointing(bool on) { checkpoint_ = on; }
  bool activation_checkpointing() const { return checkpoint_; }

  // ---- registration ----
  // `field` is the member of the derived module that its forward reads: the module keeps a pointer
  // to it, so that tie_parameter() rebinds what forward sees.
  void register_parameter(const std::string& name, Tensor& field, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M> std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // ---- access (recursive names are dotted: "layers.0.weight") ----
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, ModulePtr>>& named_children() const { return children_; }
  // Every module of the tree with its dotted path; the root is "".
  std::vector<std::pair<std::string, Module*>> named_modules();
  // A submodule by dotted path ("features.0"); errors name the missing part.
  ModulePtr get_submodule(const std::string& path) const;
  // Replaces the submodule at a dotted path (torch's setattr on the parent).
  void set_submodule(const std::string& path, ModulePtr m);
  // This module's own parameter or buffer by name.
  Tensor& tensor(const std::string& name);
  // Makes this module's own parameter `name` the tensor `shared` (nanoGPT's
  // `lm_head.weight = wte.weight`): one tensor under two names, one gradient, one optimizer state.
  // Sizes and dtype must agree; the old tensor is dropped.
  void tie_parameter(const std::string& name, const Tensor& shared);
  // Every parameter name that is an alias of an earlier one (tied), with that first name, in
  // named order: {"lm_head.weight", "transformer.wte.weight"}.
  std::vector<std::pair<std::string, std::string>> tied_parameters() const;

  // ---- modes ----
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // ---- state ----
  // Parameters and persistent buffers, detached, sharing storage with the module.
  StateDict state_dict() const;
  // Copies values into this module's tensors. With strict, missing or unexpected keys are an
  // error that lists them; a shape mismatch is always an error naming the key and both shapes.
  LoadResult load_state_dict(const StateDict& sd, bool strict = true);
  void zero_grad(bool set_to_none = true);
  // Moves/casts every parameter and buffer in place (handles held elsewhere see the change).
  Module& to(Device d);
  Module& to(DType t);

  // ---- hooks ----
  int register_forward_pre_hook(ForwardPreHook h);
  int register_forward_hook(ForwardHook h);
  void remove_hook(int handle);
  bool has_hooks() const { return !pre_hooks_.empty() || !hooks_.empty(); }

  const std::string& type_name() const { return type_name_; }
  // The part inside the parentheses of the module's repr, as torch's extra_repr.
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;
  int64_t num_parameters() const;

 protected:
  void add_child(const std::string& name, ModulePtr m);

 private:
  struct Param {
    std::string name;
    Tensor* slot;  // the derived module's member
  };
  struct Buffer {
    std::string name;
    Tensor t;
    bool persistent;
  };
  void collect(const std::string& prefix, bool params, bool buffers, bool persistent_only, NamedTensors& out) const;
  void repr_into(std::string& s, int indent) const;

  std::string type_name_;
  bool training_ = true;
  bool checkpoint_ = false;
  std::vector<Param> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, ModulePtr>> children_;
  std::vector<std::pair<int, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int, ForwardHook>> hooks_;
};

// Two tensors that view the same elements of the same storage (a parameter and its alias in a
// state_dict, both detached).
bool same_tensor_data(const Tensor& a, const Tensor& b);
// The state_dict with each tied tensor's later names dropped (the first kept), as safetensors'
// save_model writes shared tensors; load_state_dict accepts it.
StateDict without_aliases(const StateDict& sd);

// Points `dst` at `src`'s data (torch's `param.data = src`): every handle to dst sees it.
void set_data(Tensor& dst, const Tensor& src);

}  // namespace tr::nn
