// TokenDataset (dataset = "tokens"): language-model windows over a token file (data/token_file.h:
// nanoGPT's uint16 train.bin / val.bin, llm.c's headered .bin), memory-mapped. Example i is
// (x = tokens[s : s+T], y = tokens[s+1 : s+T+1]) as TextDataset's: s = i * T (strided windows, an
// epoch sees each token once) or s = i (every offset; shuffled, the random windows nanoGPT draws).
#pragma once
#include <cstdint>
#include <string>
#include "data/dataset.h"
#include "data/file_bytes.h"
#include "data/token_file.h"

namespace tr::data {

class TokenDataset : public Dataset {
 public:
  struct Options {
    std::string path;
    std::string format = "auto";  // auto | nanogpt | llmc
    int64_t block_size = 128;     // T
    bool overlapping = false;
    int64_t vocab_size = 0;       // > 0: every token must be below it (the model's embedding rows)
  };
  explicit TokenDataset(Options opts);

  int64_t size() const override { return num_windows_; }
  Example get(int64_t i) const override;  // input, target: i64 [T]
  Example get_batch(const std::vector<int64_t>& idx) const override;  // i64 [B, T]
  std::string describe() const override;
  int64_t num_tokens() const { return view_.count; }
  int64_t max_token() const { return max_token_; }

 private:
  void fill(int64_t i, int64_t* x, int64_t* y) const;
  Options opts_;
  FileBytes bytes_;
  TokenFileView view_;
  int64_t num_windows_ = 0, max_token_ = -1;
};

}  // namespace tr::data
