// A dataset's resident samples live outside the tensor allocator, so that mem_peak_mb (the
// allocator's peak) counts a training step's tensors whatever the dataset holds.
#include <catch2/catch.hpp>
#include "core/allocator.h"
#include "data/dataset_storage.h"
#include "data/synthetic_dataset.h"
#include "ops/ops.h"

namespace test_dataset_storage {

using namespace tr;

TEST_CASE("dataset_storage: a CPU tensor the allocator does not count", "[data][memory]") {
  const int64_t before = memory_allocated(kCPU);
  Tensor t = data::dataset_storage({1000, 250}, DType::F32);
  CHECK(t.sizes() == Shape{1000, 250});
  CHECK(t.dtype() == DType::F32);
  CHECK(t.is_contiguous());
  CHECK(reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 64 == 0);
  CHECK(memory_allocated(kCPU) == before);
  t.fill_(2.0);
  CHECK(sum(t).item() == 500000.0);
  CHECK(data::dataset_storage({0}, DType::I64).numel() == 0);
}

TEST_CASE("datasets keep their samples outside the allocator: a synthetic set of 1 MB adds nothing", "[data][memory]") {
  const int64_t before = memory_allocated(kCPU);
  data::SyntheticDataset::Options o;
  o.size = 1024;
  o.input_shape = {256};
  data::SyntheticDataset ds(o);
  CHECK(ds.size() == 1024);
  CHECK(memory_allocated(kCPU) == before);
  CHECK(ds.get(3).input.sizes() == Shape{256});  // a sample is an ordinary tensor
}

}  // namespace test_dataset_storage
