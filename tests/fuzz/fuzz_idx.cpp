// IDX files (raw or gzip), as the Fashion-MNIST reader opens them.
#include "data/idx_dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tr::fuzz::InputFile file("data-idx");
  file.write(data, size);
  tr::fuzz::expect_clean_error([&] { (void)tr::data::read_idx(file.path()); });
  tr::fuzz::expect_clean_error([&] { (void)tr::data::read_idx(file.path(), 0x00000803); });
  return 0;
}
