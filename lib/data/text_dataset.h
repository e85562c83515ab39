// TextDataset: byte-level language-model data. The files' bytes, concatenated, are the tokens
// (0..255); example i is (x = tokens[s : s+T], y = tokens[s+1 : s+T+1]).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "data/dataset.h"

namespace tr::data {

// The files a glob pattern (glob(3), sorted) names, skipping directories, fortune's binary
// index files (*.dat) and paths that resolve to a file already listed (fortune's *.u8 symlinks).
std::vector<std::string> expand_text_glob(const std::string& pattern);

class TextDataset : public Dataset {
 public:
  static constexpr const char* kFortunesGlob = "/usr/share/games/fortunes/*";

  struct Options {
    std::vector<std::string> paths;  // files in this order (an entry with * ? [ is a glob); empty: `glob`
    std::string glob = kFortunesGlob;
    int64_t block_size = 128;        // T
    double eval_fraction = 0.1;      // the tail of the token stream: floor(n * eval_fraction) tokens
    bool train = true;               // which split this dataset serves
    // Windows: false (default) -> size() = (n - 1) / T non-overlapping windows, s = i * T, so an
    // epoch sees each token once; true -> size() = n - T windows, s = i (every offset).
    bool overlapping = false;
  };

  explicit TextDataset(Options opts);
  // A split over tokens already loaded (shared, not copied): tests and the eval twin of a train set.
  TextDataset(std::shared_ptr<const std::vector<uint8_t>> corpus, Options opts);

  int64_t size() const override { return num_windows_; }
  // input, target: i64 [T].
  Example get(int64_t i) const override;
  // input, target: i64 [B, T].
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override;

  int64_t block_size() const { return opts_.block_size; }
  int64_t vocab_size() const { return 256; }
  // Start of window i in the split's token stream.
  int64_t window_start(int64_t i) const { return opts_.overlapping ? i : i * opts_.block_size; }
  int64_t num_tokens() const { return end_ - begin_; }  // tokens in this split
  int64_t corpus_tokens() const { return int64_t(corpus_->size()); }  // both splits
  const std::vector<std::string>& files() const { return files_; }
  const std::shared_ptr<const std::vector<uint8_t>>& corpus() const { return corpus_; }
  const uint8_t* tokens() const { return corpus_->data() + begin_; }  // this split's first token

  // The files' bytes concatenated.
  static std::vector<uint8_t> read_files(const std::vector<std::string>& paths);

 private:
  void init();
  void fill(int64_t i, int64_t* x, int64_t* y) const;

  Options opts_;
  std::vector<std::string> files_;
  std::shared_ptr<const std::vector<uint8_t>> corpus_;
  int64_t begin_ = 0, end_ = 0;  // this split: corpus[begin_, end_)
  int64_t num_windows_ = 0;
};

}  // namespace tr::data
