// TokenDataset (dataset = "tokens"): language-model windows over a token file (data/token_file.h:
// nanoGPT's uint16 train.bin / val.bin, llm.c's headered .bin), memory-mapped, cut in windows as
// data/token_windows.h says (overlapping and shuffled: the random windows nanoGPT draws).
#pragma once
#include <cstdint>
#include <string>
#include "data/token_windows.h"
#include "data/file_bytes.h"
#include "data/token_file.h"

namespace tr::data {

class TokenDataset : public TokenWindows {
 public:
  struct Options {
    std::string path;
    std::string format = "auto";  // auto | nanogpt | llmc
    int64_t block_size = 128;     // T
    bool overlapping = false;
    int64_t vocab_size = 0;       // > 0: every token must be below it (the model's embedding rows)
  };
  explicit TokenDataset(Options opts);

  std::string describe() const override;
  int64_t num_tokens() const { return view_.count; }
  int64_t max_token() const { return max_token_; }

 private:
  void read_tokens(int64_t start, int64_t n, int64_t* out) const override;
  Options opts_;
  FileBytes bytes_;
  TokenFileView view_;
  int64_t max_token_ = -1;
};

}  // namespace tr::data
