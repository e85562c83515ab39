// Token files (nanoGPT uint16, llm.c headered): every format choice; each token of a parsed view is read.
#include "data/token_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* format : {"auto", "nanogpt", "llmc"}) {
    tr::fuzz::expect_clean_error([&] {
      tr::data::TokenFileView v = tr::data::parse_token_file(data, size, "fuzz.bin", format);
      if (v.count < 0 || v.tokens < data || v.tokens + v.count * v.width > data + size) __builtin_trap();
      volatile int64_t sum = 0;
      for (int64_t i = 0; i < v.count; ++i) sum = sum + v.at(i);
    });
  }
  return 0;
}
