// `trainer info`: the build's kernels and libraries, and the devices this process sees.
#include <omp.h>
#include <cstdio>
#include "app/commands.h"
#include "core/allocator.h"
#include "core/cuda_hooks.h"
#include "ops/cpu/blas_info.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/sgemm.h"
#include "ops/cuda_info.h"

namespace tr::app {

namespace {

void print_cuda_device(int i) {
  std::printf("  cuda:%d: %s\n", i, cuda::device_description(i).c_str());
  const MemoryStats m = memory_stats(Device(DeviceType::CUDA, i));  // this process's, as torch.cuda.memory_stats
  std::printf("    allocated %s (peak %s), reserved %s (peak %s)\n", format_bytes(double(m.allocated)).c_str(),
              format_bytes(double(m.peak_allocated)).c_str(), format_bytes(double(m.reserved)).c_str(),
              format_bytes(double(m.peak_reserved)).c_str());
  std::printf("    %lld segments, %s free in split segments, %lld of %lld allocations from the cache\n",
              (long long)m.segments, format_bytes(double(m.inactive_split)).c_str(), (long long)m.cache_hits,
              (long long)m.num_allocs);
}

}  // namespace

void InfoCommand::add_to(CLI::App& app) {
  app.add_subcommand("info", "print build and device information")->callback([this] { execute(); });
}

void InfoCommand::execute() const {
  std::printf("trainer (C++ tensor + autograd core)\n");
  std::printf("cpu threads: %d (OpenMP pool shared with OpenBLAS and oneDNN)\n", omp_get_max_threads());
  std::printf("cpu blas: %s\n", cpu::blas_info().c_str());
  std::printf("cpu f32 gemm: %s\n", cpu::sgemm_info().c_str());
  std::printf("cpu bf16 matmul: %s\n", cpu::bf16_gemm_name(cpu::bf16_gemm_kernel()));
  std::printf("cuda compiled: %s\n", cuda::is_compiled() ? "yes" : "no");
  std::printf("cuda libraries: %s\n", cuda::cuda_info().c_str());
  const int n = cuda::device_count();
  if (n > 0) {
    std::printf("cuda devices: %d\n", n);
    for (int i = 0; i < n; ++i) print_cuda_device(i);
  } else
    std::printf("cuda devices: 0 (%s)\n", cuda::unavailable_reason().c_str());
}

}  // namespace tr::app
