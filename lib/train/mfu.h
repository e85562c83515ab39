// Model FLOP utilisation (MFU): the FLOPs of a training step's matrix products and convolutions
// (counted on the run's first step, ops/flop_counter.h) per second, as a fraction of the peak this
// device measures for a large matrix product in the step's compute dtype at the run's thread count.
#pragma once
#include <string>
#include "core/device.h"
#include "core/dtype.h"

namespace tr::train {

// FLOP/s of the best of 3 products of two n x n matrices (after one warm-up) of dtype `t` on `d`:
// n = 1024 on the CPU (~10 ms each at 200 GFLOP/s), 4096 on a GPU.
double measure_matmul_peak(Device d, DType t);

// The peak MFU divides by, measured once per machine and kept, so that MFU compares across runs
// (two measurements on a shared VM differ by 15%): the first run measures, later runs read
// `file`. An entry is keyed by what its value depends on: the CPU's model and instruction sets
// and the thread count, or the GPU's description, and the dtype. A file that cannot be read or
// written is measured past, never an error.
struct MatmulPeak {
  double flops = 0;
  bool cached = false;  // read from the file, not measured by this run
};
MatmulPeak matmul_peak(Device d, DType t, const std::string& file);
// A peak below what a run achieves (`achieved` FLOP/s of its matrix products) was measured on a
// busy machine, or the run's products beat the square one: measured again (when `measure`), and the
// largest of that, `achieved` and `old` kept in `file` and returned, so that MFU stays <= 1.
double raise_matmul_peak(Device d, DType t, const std::string& file, double old, double achieved, bool measure);
// peaks.json in trainer's cache directory (data::DecodeCache::cache_root); "" without one.
std::string default_peaks_file();
// The key of (d, t) on this machine, e.g. "cpu Intel(R) Xeon(R) Processor (flags 3f2a...), 2
// threads, float32".
std::string peak_key(Device d, DType t);

}  // namespace tr::train
