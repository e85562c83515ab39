// TokenDataset (dataset = "tokens"): language-model windows over token files (data/token_file.h:
// nanoGPT's uint16 train.bin / val.bin, llm.c's headered .bin of uint16 or uint32 tokens), one file
// or many shards (llm.c's FineWeb: 100 files of 100M tokens), each memory-mapped with its pages read
// on demand and cut in windows as data/token_windows.h says: a window never crosses from one shard
// into the next (overlapping and shuffled: the random windows nanoGPT draws).
//
// Opening reads each file's header and checks its size, nothing more: no work grows with the
// tokens. The token ids are checked against the vocabulary as windows are read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "data/file_bytes.h"
#include "data/token_file.h"
#include "data/token_windows.h"

namespace tr::data {

// One token file, mapped.
struct TokenShard {
  std::string path;
  FileBytes bytes;
  TokenFileView view;  // its tokens, inside bytes
};

class TokenDataset : public TokenWindows {
 public:
  struct Options {
    std::vector<std::string> paths;  // the shards in order (data/shard_paths.h expands globs)
    std::string format = "auto";     // auto (each file by its first bytes) | nanogpt | llmc
    int64_t block_size = 128;        // T
    bool overlapping = false;
    int64_t vocab_size = 0;  // > 0: every token read must be below it (the model's embedding rows)
  };
  explicit TokenDataset(Options opts);

  std::string describe() const override;
  // {"window": i, "shard": k, "file": "<name>", "offset": <token offset of the window in the shard>}
  std::string locate(int64_t i) const override;

  const std::vector<TokenShard>& shards() const { return shards_; }
  int64_t num_tokens() const { return num_tokens_; }  // over all shards
  // The shards that hold fewer than block_size + 1 tokens and so give no window.
  std::vector<const TokenShard*> short_shards() const;
  // The shards' file names and token counts as data/data_state.h's state (a JSON object).
  std::string shards_state() const;

 private:
  void read_tokens(int64_t segment, int64_t start, int64_t n, int64_t* out) const override;
  [[noreturn]] void bad_token(const TokenShard& s, int64_t at, int64_t token) const;
  Options opts_;
  std::vector<TokenShard> shards_;
  int64_t num_tokens_ = 0;
};

}  // namespace tr::data
