// FLOPs of the matrix products and convolutions dispatched on this thread while a FlopCounter is
// alive (torch.utils.flop_counter.FlopCounterMode's count: 2 per multiply-add, forward and backward
// ops alike, so a dense model's training step counts ~6 multiply-adds per parameter and sample).
// Ops declare their count with OpDef::flops; ops run inside another op's kernel are not counted
// again. The trainer counts its first step to report MFU.
#pragma once
#include <vector>
#include "core/tensor.h"
#include "ops/attrs.h"

namespace tr {

struct OpDef;

class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  double flops() const { return flops_; }

  // dispatch's hook: counts `op` (when it declares flops and no kernel of this thread is running)
  // and marks its kernel as running for the scope's life.
  class KernelScope {
   public:
    KernelScope(const OpDef& op, const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& a);
    ~KernelScope();
    KernelScope(const KernelScope&) = delete;
    KernelScope& operator=(const KernelScope&) = delete;
  };

  // No counter counts the ops of this scope: activation checkpointing's recomputation of a forward,
  // which model FLOPs (MFU, PaLM's definition) leave out. (torch's FlopCounterMode counts it.)
  class Pause {
   public:
    Pause();
    ~Pause();
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    FlopCounter* paused_;
  };

 private:
  double flops_ = 0;
  FlopCounter* outer_;
};

}  // namespace tr
