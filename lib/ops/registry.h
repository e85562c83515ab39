// The op registry: every op is one OpDef with a shape/dtype rule, a kernel slot per device
// type, and a backward written with differentiable ops (or an explicit non-differentiable mark).
#pragma once
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "core/registry.h"
#include "core/tensor.h"
#include "ops/attrs.h"
#include "ops/autocast.h"

namespace tr {

struct TensorSpec {
  Shape sizes;
  DType dtype = DType::F32;
  std::optional<Device> device;  // where the output lives, when not on the inputs' device (_to_copy)
};

struct BackwardContext {
  const std::vector<Tensor>& inputs;   // saved inputs (undefined where the op saves none)
  const std::vector<Tensor>& outputs;  // saved outputs (undefined where the op saves none)
  const std::vector<Tensor>& grads;    // one per output; zeros where no gradient arrived
  const Attrs& attrs;
  const std::vector<TensorSpec>& input_specs;  // sizes and dtypes of every input
  const std::vector<bool>& needs_input_grad;
};

// What backward formulas read most: the gradient of the first output, and input i's shape.
inline const Tensor& G(const BackwardContext& c) { return c.grads[0]; }
inline const Shape& in_shape(const BackwardContext& c, int i = 0) { return c.input_specs[size_t(i)].sizes; }

using InferFn = std::vector<TensorSpec> (*)(const std::vector<Tensor>& in, const Attrs& a);
// the InferFn of ops that write into their inputs and return nothing (copy_, fill_, the random fills)
inline std::vector<TensorSpec> no_outputs(const std::vector<Tensor>&, const Attrs&) { return {}; }
using KernelFn = void (*)(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a);
using ViewFn = Tensor (*)(const Tensor& in, const Attrs& a);
using BackwardFn = std::vector<Tensor> (*)(const BackwardContext& ctx);
using FlopsFn = double (*)(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& a);

enum class OpKind : uint8_t { Compute, View };

// How inputs are brought to one dtype before the kernel runs.
enum class Promote : uint8_t {
  None,         // kernel takes inputs as they are
  Common,       // all inputs cast to their result_type
  CommonFloat,  // result_type, then integers become the default float (f32)
};

struct OpDef {
  std::string name;
  int num_inputs = 1;  // -1: variadic
  OpKind kind = OpKind::Compute;
  Promote promote = Promote::None;
  amp::CastPolicy autocast = amp::CastPolicy::None;  // what autocast does to the inputs
  InferFn infer = nullptr;
  std::array<KernelFn, kNumDeviceTypes> kernels{};
  ViewFn view = nullptr;  // OpKind::View: the aliasing output, device independent
  BackwardFn backward = nullptr;
  bool differentiable = true;  // false: no backward by design (comparisons, argmax, masks)
  bool pointwise = false;      // kernel is an elementwise loop that may write into a strided output
  // With promotion: the CUDA kernel reads an f16 / bf16 tensor beside f32 ones as it is, converting
  // per element (exact), so dispatch skips that input's cast and its launch (x + y under autocast).
  bool cuda_reads_mixed_floats = false;
  bool save_inputs = true;
  bool save_outputs = false;
  uint32_t unsaved_outputs = 0;  // with save_outputs: bit i set = output i is not kept (undefined in backward)
  uint32_t unsaved_inputs = 0;   // with save_inputs: bit i set = input i is not kept (undefined in backward)
  // bit i set: when output i gets no gradient, backward sees grads[i] undefined instead of zeros
  // (torch's ctx.set_materialize_grads(False)): no zero tensor is made for statistics such as
  // mean, rstd or lse that only the backward reads
  uint32_t unmaterialized_grads = 0;
  std::string grad_name;    // torch's name of the backward node: "AddBackward0"
  FlopsFn flops = nullptr;  // 2 x multiply-adds of one call (matrix products, convolutions): ops/flop_counter.h

  static constexpr const char* kRegistryKind = "op";
};

// Every op: Registry<OpDef>. An op's definition and its per-device kernels register from
// different files in any order, so entries are created on first use: def_op(name).
using OpRegistry = Registry<OpDef>;
OpDef& def_op(const std::string& name);

// Static registration helpers: TR_REGISTER_OP(add) { d.num_inputs = 2; ... }
struct OpRegistrar {
  OpRegistrar(const char* name, void (*fill)(OpDef&)) { fill(def_op(name)); }
};
struct KernelRegistrar {
  KernelRegistrar(const char* name, DeviceType dev, KernelFn fn) { def_op(name).kernels[int(dev)] = fn; }
};

#define TR_CONCAT_(a, b) a##b
#define TR_CONCAT(a, b) TR_CONCAT_(a, b)
#define TR_REGISTER_OP(NAME)                                                                       \
  static void TR_CONCAT(tr_fill_op_, NAME)(::tr::OpDef & d);                                       \
  static ::tr::OpRegistrar TR_CONCAT(tr_op_registrar_, NAME)(#NAME, TR_CONCAT(tr_fill_op_, NAME)); \
  static void TR_CONCAT(tr_fill_op_, NAME)(::tr::OpDef & d)
#define TR_REGISTER_KERNEL(NAME, DEV, FN) \
  static ::tr::KernelRegistrar TR_CONCAT(tr_kernel_registrar_##NAME##_, DEV)(#NAME, ::tr::DeviceType::DEV, FN)

// Runs an op: checks devices, applies autocast, promotes dtypes, infers outputs, runs the device
// kernel and has autograd record the call. Returns all outputs.
std::vector<Tensor> dispatch(const char* op, std::vector<Tensor> inputs, const Attrs& attrs = {});
Tensor dispatch1(const char* op, std::vector<Tensor> inputs, const Attrs& attrs = {});
// self = op(self, others...) in place. Pointwise ops without autograd write straight into self;
// otherwise the result is computed out of place, copied in, and becomes self's history.
Tensor& dispatch_inplace(const char* op, Tensor& self, std::vector<Tensor> others, const Attrs& attrs = {});

// Autograd's half of dispatch: records one op call as a graph node. The autograd floor installs it
// (lib/autograd/op_node.cpp) so that ops never name the graph; dispatch calls it when grad mode is
// on, the op is differentiable and an input requires grad.
using AutogradRecorder = void (*)(const OpDef& op, const Attrs& attrs, Device device, const std::vector<Tensor>& inputs,
                                  std::vector<Tensor>& outputs);
void set_autograd_recorder(AutogradRecorder r);

// Forensics of a diverged step (the trainer re-runs it under [train] nonfinite = "stop"), torch's
// anomaly mode carried into the forward: while on, every op checks its floating outputs, and the
// first that makes an inf or a NaN from finite inputs throws NonFiniteOpError naming itself and
// its inputs' shapes (an op whose inputs were already non-finite passes the blame on). Global, as
// torch's anomaly mode; off costs one load per op.
class NonFiniteOpCheck {
 public:
  static bool is_enabled();
  static void set_enabled(bool on);
};
class NonFiniteOpError : public Error {
 public:
  NonFiniteOpError(const std::string& what, std::string op) : Error(what), op_(std::move(op)) {}
  const std::string& op() const { return op_; }

 private:
  std::string op_;
};

// True when `op` has a kernel for d's device type (fused ops fall back to a composite where not).
bool has_kernel(const char* op, Device d);

// Shape string like "[2, 3]" for error messages.
std::string shape_str(const Shape& s);
// torch.result_type over inputs (wrapped numbers and 0-dim tensors weaker than dimensioned ones).
DType result_type(const std::vector<Tensor>& inputs);

}  // namespace tr
