// The byte-level text dataset: options from the first 4 bytes (block size, eval fraction, windows),
// the rest the corpus; both splits, every window's fetch at the ends, and a batch.
#include "data/text_dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  auto corpus = std::make_shared<const std::vector<uint8_t>>(data + 4, data + size);
  for (bool train : {true, false}) {
    tr::data::TextDataset::Options o;
    o.block_size = int64_t(data[0]) - 8;  // negative and zero too
    o.eval_fraction = double(int(data[1]) - 16) / 200.0;
    o.overlapping = data[2] & 1;
    o.train = train;
    tr::fuzz::expect_clean_error([&] {
      tr::data::TextDataset d(corpus, o);
      const int64_t n = d.size();
      if (n <= 0) return;
      std::vector<int64_t> idx = {0, n - 1, int64_t(data[3]) % n};
      for (int64_t i : idx) {
        tr::data::Example e = d.get(i);
        if (e.input.numel() != d.block_size()) __builtin_trap();
      }
      (void)d.get_batch(idx);
    });
  }
  return 0;
}
