// The matmul peak MFU divides by (train/mfu.h): measured by a machine's first run and kept in a
// file, read back by later runs, keyed by the device, threads and dtype; a damaged file is measured
// past and rewritten.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include "train/mfu.h"
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

}  // namespace test_matmul_peak
