// safetensors: the header parsed from memory, then the whole file loaded as tensors.
#include "fuzz_util.h"
#include "io/safetensors.h"
#include "io/safetensors_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tr::fuzz::InputFile file("model.safetensors");
  bool parsed = false;
  tr::fuzz::expect_clean_error([&] {
    tr::io::safetensors::Header h = tr::io::safetensors::parse(data, size, "fuzz");
    for (const auto& t : h.tensors)  // the contract: every tensor's bytes lie inside the input
      if (h.data_start() + t.end > size || t.begin > t.end) __builtin_trap();
    parsed = true;
  });
  file.write(data, size);
  bool loaded = false;
  tr::fuzz::expect_clean_error([&] {
    (void)tr::io::load_safetensors(file.path());
    loaded = true;
  });
  if (loaded && !parsed) __builtin_trap();  // the loader accepted what the format layer refused
  return 0;
}
