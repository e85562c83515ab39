#include "ops/registry.h"
#include <atomic>
#include "ops/flop_counter.h"
#include "ops/op_profiler.h"
#include <cctype>
#include <unordered_map>
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr {

namespace {
AutogradRecorder autograd_recorder = nullptr;  // installed once, at static initialisation, by lib/autograd
}  // namespace

void set_autograd_recorder(AutogradRecorder r) { autograd_recorder = r; }

OpDef& def_op(const std::string& name) {
  OpDef& d = OpRegistry::get().entry(name);
  if (d.name.empty()) {
    d.name = name;
    // "log_softmax" -> "LogSoftmaxBackward0", torch's naming of grad_fn classes.
    std::string camel;
    bool up = true;
    for (char c : name) {
      if (c == '_') {
        up = true;
        continue;
      }
      camel += up ? char(std::toupper(c)) : c;
      up = false;
    }
    d.grad_name = camel + "Backward0";
  }
  return d;
}

std::string shape_str(const Shape& s) { return str(s); }

std::string Attrs::str() const {
  std::string r;
  for (auto& [k, v] : kv_) {
    if (!r.empty()) r += ", ";
    r += k + "=";
    std::visit(
        [&](auto&& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>)
            r += x;
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            r += tr::str(x);
          else if constexpr (std::is_same_v<T, bool>)
            r += x ? "true" : "false";
          else
            r += std::to_string(x);
        },
        v);
  }
  return r;
}

DType result_type(const std::vector<Tensor>& inputs) {
  // torch's three priority levels: dimensioned tensors > 0-dim tensors > wrapped numbers.
  // A lower level only matters when it is of a higher category (bool < integer < float).
  auto category = [](DType t) { return t == DType::Bool ? 0 : (is_floating(t) ? 2 : 1); };
  std::optional<DType> level[3];
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    int l = t.is_wrapped_number() ? 2 : (t.dim() == 0 ? 1 : 0);
    level[l] = level[l] ? promote_types(*level[l], t.dtype()) : t.dtype();
  }
  std::optional<DType> r;
  for (int l = 0; l < 3; ++l) {
    if (!level[l]) continue;
    if (!r)
      r = level[l];
    else if (category(*level[l]) > category(*r)) {
      // A wrapped float with integer tensors gives the default float dtype.
      r = (l == 2 && is_floating(*level[l])) ? DType::F32 : *level[l];
    }
  }
  return r.value_or(DType::F32);
}

namespace {

void check_devices(const OpDef& op, const std::vector<Tensor>& in) {
  const Tensor* first = nullptr;
  for (const Tensor& t : in) {
    // CPU scalars (0-dim) combine with tensors on any device, as in torch.
    if (!t.defined() || (t.dim() == 0 && t.device().is_cpu())) continue;
    if (!first) {
      first = &t;
      continue;
    }
    if (t.device() != first->device()) {
      std::string shapes;
      for (const Tensor& u : in)
        if (u.defined()) shapes += (shapes.empty() ? "" : ", ") + shape_str(u.sizes()) + " on " + u.device().str();
      throw Error(str(op.name, ": expected all tensors to be on the same device, but found ", first->device().str(),
                      " and ", t.device().str(), " (inputs: ", shapes, ")"));
    }
  }
}

}  // namespace

namespace {
// Op lookup cached by the address of the name literal (callers pass string literals).
const OpDef& find_op(const char* name) {
  thread_local std::unordered_map<const char*, const OpDef*> cache;
  auto it = cache.find(name);
  if (it != cache.end() && it->second->name == name) return *it->second;  // verified: names may be non-literals
  const OpDef& d = OpRegistry::get().at(name);
  cache[name] = &d;
  return d;
}
}  // namespace

bool has_kernel(const char* op, Device d) { return find_op(op).kernels[int(d.type)] != nullptr; }

namespace {

std::atomic<bool> nonfinite_check{false};

bool any_bad(const std::vector<Tensor>& ts) {
  std::vector<Tensor> fl;
  for (const Tensor& t : ts)
    if (t.defined() && is_floating(t.dtype())) fl.push_back(t);
  return !fl.empty() && any_non_finite(fl).item() != 0;
}

// NonFiniteOpCheck's test of one op call (the check's own ops run with it off)
void check_non_finite(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  nonfinite_check = false;
  try {
    const bool bad = any_bad(outputs) && !any_bad(inputs);
    nonfinite_check = true;
    if (!bad) return;
  } catch (...) {
    nonfinite_check = true;
    throw;
  }
  std::string shapes;
  for (auto& t : inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(t.sizes());
  throw NonFiniteOpError(str("op '", op.name, "' made an inf or NaN from finite inputs of shapes (", shapes, ")"),
                         op.name);
}

}  // namespace

bool NonFiniteOpCheck::is_enabled() { return nonfinite_check.load(std::memory_order_relaxed); }
void NonFiniteOpCheck::set_enabled(bool on) { nonfinite_check = on; }

std::vector<Tensor> dispatch(const char* name, std::vector<Tensor> inputs, const Attrs& attrs) {
  const OpDef& op = find_op(name);
  TR_CHECK(op.num_inputs < 0 || size_t(op.num_inputs) == inputs.size(), name, ": expected ", op.num_inputs,
           " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    TR_CHECK(inputs[i].defined(), name, ": input ", i, " is an undefined tensor");
  check_devices(op, inputs);

  Device dev = inputs.empty() ? kCPU : inputs[0].device();
  for (auto& t : inputs)
    if (!(t.dim() == 0 && t.device().is_cpu())) {
      dev = t.device();
      break;
    }
  if (op.autocast != amp::CastPolicy::None && amp::autocast_active(dev.type))
    inputs = amp::autocast_inputs(op.autocast, std::move(inputs), dev.type);

  if (op.promote != Promote::None) {
    DType rt = result_type(inputs);
    if (op.promote == Promote::CommonFloat && !is_floating(rt)) rt = DType::F32;
    const bool mixed = op.cuda_reads_mixed_floats && dev.is_cuda() && rt == DType::F32;
    for (auto& t : inputs) {
      if (t.dtype() == rt) continue;
      if (t.is_wrapped_number())
        t = wrap_scalar(t.item(), rt);
      else if (!(mixed && (t.dtype() == DType::F16 || t.dtype() == DType::BF16) && t.device() == dev))
        t = cast(t, rt);
    }
  }

  std::vector<Tensor> outputs;
  if (op.kind == OpKind::View) {
    outputs.push_back(op.view(inputs[0], attrs));
    outputs[0].impl()->is_view = true;
  } else {
    std::vector<TensorSpec> specs;
    try {
      specs = op.infer(inputs, attrs);
    } catch (const Error& e) {
      std::string m = e.what();
      if (m.rfind(op.name, 0) == 0) throw;
      throw Error(op.name + ": " + m);  // name the op in shape errors raised by shared rules
    }
    KernelFn k = op.kernels[int(dev.type)];
    TR_CHECK(k, name, ": no kernel for device ", dev.str());
    try {
      outputs.reserve(specs.size());
      for (auto& s : specs) outputs.push_back(empty(s.sizes, TensorOptions(s.dtype).device(s.device.value_or(dev))));
      NoGradGuard ng;                         // composite kernels call other ops; nothing inside a kernel is recorded
      amp::AutocastExcludeGuard no_autocast;  // nor cast again
      OpTimer timer(name, inputs.empty() ? DType::F32 : inputs[0].dtype(), dev, &inputs);
      FlopCounter::KernelScope counted(op, inputs, outputs, attrs);
      k(inputs, outputs, attrs);
      if (NonFiniteOpCheck::is_enabled()) check_non_finite(op, inputs, outputs);
    } catch (const OutOfMemoryError& e) {
      if (e.names_op()) throw;
      std::string shapes;
      for (auto& t : inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(t.sizes());
      throw OutOfMemoryError(str(e.what(), " (op ", op.name, " on inputs of shapes ", shapes, ")"), true);
    }
  }

  bool needs_grad = false;
  if (GradMode::is_enabled() && op.differentiable)
    for (auto& t : inputs) needs_grad = needs_grad || t.requires_grad();
  if (!needs_grad) return outputs;

  TR_CHECK(op.backward, name, " is marked differentiable but has no backward");
  TR_CHECK(autograd_recorder, name, ": an input requires grad, but this program links no autograd layer to record it");
  autograd_recorder(op, attrs, dev, inputs, outputs);
  return outputs;
}

Tensor dispatch1(const char* op, std::vector<Tensor> inputs, const Attrs& attrs) {
  return dispatch(op, std::move(inputs), attrs)[0];
}

}  // namespace tr
