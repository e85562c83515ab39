// TR_PROFILE_OPS=1: each op's kernel is timed with the device synchronised before and after it,
// summed per op and dtype, and the table printed to stderr at exit (calls, total ms, share). A
// developer's tool for finding where a step's time goes (an op run by another op's kernel counts
// in the outer one); it slows every op down, so compare shares, not totals, with an unprofiled run.
// TR_PROFILE_OPS=shapes keys the rows by the inputs' shapes too (a non-contiguous input is marked
// with "~"), to tell which call of an op is the slow one.
#pragma once
#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace tr {

bool op_profiling();

// Times the kernel run in its scope (when op_profiling()).
class OpTimer {
 public:
  // inputs: named in the row's key under TR_PROFILE_OPS=shapes
  OpTimer(const char* op, DType t, Device d, const std::vector<Tensor>* inputs = nullptr);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  const char* op_;
  DType dtype_;
  Device device_;
  double t0_ = 0;
  std::string shapes_;
};

}  // namespace tr
