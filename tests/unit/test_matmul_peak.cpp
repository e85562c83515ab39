// The matmul peak MFU divides by (train/mfu.h): measured by a machine's first run and kept in a
// file, read back by later runs, keyed by the device, threads and dtype; a damaged file is measured
// past and rewritten.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include "train/mfu.h"
#include "ops/cpu/sgemm.h"
#include "ops/ops.h"
#include "unit/require_gpu.h"
#include "unit/temp_dir.h"

namespace test_matmul_peak {

using namespace tr;
using Catch::Matchers::Contains;

TEST_CASE("matmul peak: measured once per machine, then read back", "[mfu]") {
  TempDir tmp;
  const std::string file = tmp / "cache/peaks.json";  // its directory made on the first write
  const train::MatmulPeak first = train::matmul_peak(kCPU, DType::F32, file);
  CHECK_FALSE(first.cached);
  CHECK(first.flops > 1e8);
  const train::MatmulPeak again = train::matmul_peak(kCPU, DType::F32, file);
  CHECK(again.cached);
  CHECK(again.flops == first.flops);  // the same denominator for every later run

  // the entry names what the value depends on; another dtype is another entry
  const std::string key = train::peak_key(kCPU, DType::F32);
  CHECK_THAT(key, Contains("cpu ") && Contains(" threads, float32"));
  // and the GEMM's kernels, so that a run held to AVX2 (ONEDNN_MAX_CPU_ISA) keeps its own peak
  CHECK_THAT(key, Contains(cpu::sgemm_info()));
  CHECK(train::peak_key(kCPU, DType::F64) != key);
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at(key).get<double>() == first.flops);
  CHECK_FALSE(train::matmul_peak(kCPU, DType::F64, file).cached);
  CHECK(nlohmann::json::parse(std::ifstream(file)).size() == 2);

  // a damaged file: measured again, and the file made whole
  std::ofstream(file) << "{ not json";
  CHECK_FALSE(train::matmul_peak(kCPU, DType::F32, file).cached);
  CHECK(train::matmul_peak(kCPU, DType::F32, file).cached);
  // no file to keep it in: measured by the run
  CHECK_FALSE(train::matmul_peak(kCPU, DType::F32, "").cached);
}

TEST_CASE("matmul peak: one a run outdoes is measured again and raised, so that MFU stays <= 1", "[mfu]") {
  TempDir tmp;
  const std::string file = tmp / "peaks.json";
  const std::string key = train::peak_key(kCPU, DType::F32);
  std::ofstream(file) << nlohmann::json{{key, 1e3}}.dump();  // as kept by a first run on a busy machine
  REQUIRE(train::matmul_peak(kCPU, DType::F32, file).flops == 1e3);
  const double measured = train::raise_matmul_peak(kCPU, DType::F32, file, 1e3, 5e3, true);
  CHECK(measured > 1e8);  // this machine's product, not the run's 5e3
  CHECK(train::matmul_peak(kCPU, DType::F32, file).flops == measured);
  // without measuring: the achieved rate where it is the larger, never below the old peak
  CHECK(train::raise_matmul_peak(kCPU, DType::F32, file, measured, 1e15, false) == 1e15);
  CHECK(train::matmul_peak(kCPU, DType::F32, file).flops == 1e15);
  CHECK(train::raise_matmul_peak(kCPU, DType::F32, file, 1e15, 1e3, false) == 1e15);
}

TEST_CASE("matmul peak: a GPU's entry does not change with its free memory", "[gpu][mfu]") {
  TR_REQUIRE_GPU();
  const Device gpu(DeviceType::CUDA, 0);
  const std::string key = train::peak_key(gpu, DType::F32);
  CHECK_THAT(key, Contains("compute capability") && !Contains("free"));
  const Tensor held = zeros({64 << 20}, TensorOptions(DType::F32).device(gpu));  // 256 MiB less free
  CHECK(train::peak_key(gpu, DType::F32) == key);
}

}  // namespace test_matmul_peak
