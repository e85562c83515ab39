// TextDataset: byte-level language-model data. The files' bytes, concatenated, are the tokens
// (0..255), cut in windows as data/token_windows.h says.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "data/token_windows.h"

namespace tr::data {

// The files a glob pattern (glob(3), sorted) names, skipping directories, fortune's binary
// index files (*.dat) and paths that resolve to a file already listed (fortune's *.u8 symlinks).
std::vector<std::string> expand_text_glob(const std::string& pattern);
// The files of a list of paths in order, each entry with * ? or [ expanded in place by
// expand_text_glob; an empty list is `dflt` expanded (Debian's fortunes).
std::vector<std::string> expand_text_paths(const std::vector<std::string>& entries, const std::string& dflt);

class TextDataset : public TokenWindows {
 public:
  static constexpr const char* kFortunesGlob = "/usr/share/games/fortunes/*";

  struct Options {
    std::vector<std::string> paths;  // files in this order (an entry with * ? [ is a glob); empty: `glob`
    std::string glob = kFortunesGlob;
    int64_t block_size = 128;    // T
    double eval_fraction = 0.1;  // the tail of the token stream: floor(n * eval_fraction) tokens
    bool train = true;           // which split this dataset serves
    // Windows: false (default) -> size() = (n - 1) / T non-overlapping windows, s = i * T, so an
    // epoch sees each token once; true -> size() = n - T windows, s = i (every offset).
    bool overlapping = false;
  };

  explicit TextDataset(Options opts);
  // A split over tokens already loaded (shared, not copied): tests and the eval twin of a train set.
  TextDataset(std::shared_ptr<const std::vector<uint8_t>> corpus, Options opts);

  std::string describe() const override;

  int64_t vocab_size() const { return 256; }
  int64_t num_tokens() const { return end_ - begin_; }                // tokens in this split
  int64_t corpus_tokens() const { return int64_t(corpus_->size()); }  // both splits
  const std::vector<std::string>& files() const { return files_; }
  const std::shared_ptr<const std::vector<uint8_t>>& corpus() const { return corpus_; }
  const uint8_t* tokens() const { return corpus_->data() + begin_; }  // this split's first token

  // The files' bytes concatenated.
  static std::vector<uint8_t> read_files(const std::vector<std::string>& paths);

 private:
  void init();
  void read_tokens(int64_t segment, int64_t start, int64_t n, int64_t* out) const override;

  Options opts_;
  std::vector<std::string> files_;
  std::shared_ptr<const std::vector<uint8_t>> corpus_;
  int64_t begin_ = 0, end_ = 0;  // this split: corpus[begin_, end_)
};

}  // namespace tr::data
