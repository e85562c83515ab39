#include "ops/flop_counter.h"
#include "ops/registry.h"

namespace tr {

namespace {
thread_local FlopCounter* active = nullptr;  // innermost live counter of this thread
thread_local int kernel_depth = 0;           // kernels of this thread running (nested dispatch inside)
}  // namespace

FlopCounter::FlopCounter() : outer_(active) { active = this; }
FlopCounter::~FlopCounter() { active = outer_; }

FlopCounter::KernelScope::KernelScope(const OpDef& op, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                      const Attrs& a) {
  if (active != nullptr && kernel_depth == 0 && op.flops != nullptr) {
    const double f = op.flops(in, out, a);
    for (FlopCounter* c = active; c != nullptr; c = c->outer_) c->flops_ += f;
  }
  ++kernel_depth;
}
FlopCounter::KernelScope::~KernelScope() { --kernel_depth; }

FlopCounter::Pause::Pause() : paused_(active) { active = nullptr; }
FlopCounter::Pause::~Pause() { active = paused_; }

}  // namespace tr
