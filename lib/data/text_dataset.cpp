// Byte-level text corpus: glob expansion, file concatenation, train/eval split by position, windows;
// its registration as the dataset "text".
#include "data/text_dataset.h"
#include "data/dataset_registry.h"
#include "data/shard_paths.h"
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace tr::data {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<std::string> expand_text_glob(const std::string& pattern) {
  namespace fs = std::filesystem;
  const std::vector<std::string> matches = glob_paths(pattern);
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const std::string& p : matches) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec) || ends_with(p, ".dat")) continue;
    std::string canon = fs::canonical(p, ec).string();
    if (ec) canon = p;
    if (!seen.insert(canon).second) continue;
    files.push_back(p);
  }
  TR_CHECK(!files.empty(), "TextDataset: no text files match '", pattern, "' (", matches.size(),
           " paths matched; directories, *.dat and duplicate symlinks are skipped)",
           pattern == TextDataset::kFortunesGlob ? "; Debian's fortunes package installs this corpus" : "");
  return files;
}

std::vector<uint8_t> TextDataset::read_files(const std::vector<std::string>& paths) {
  std::vector<uint8_t> out;
  for (const std::string& p : paths) {
    std::ifstream f(p, std::ios::binary);
    TR_CHECK(f.good(), "TextDataset: cannot open '", p, "': ", std::strerror(errno));
    f.seekg(0, std::ios::end);
    const std::streamoff n = f.tellg();
    f.seekg(0, std::ios::beg);
    TR_CHECK(n >= 0, "TextDataset: cannot read the size of '", p, "'");
    const size_t at = out.size();
    out.resize(at + size_t(n));
    f.read(reinterpret_cast<char*>(out.data() + at), n);
    TR_CHECK(f.gcount() == n, "TextDataset: '", p, "': read ", f.gcount(), " of ", n, " bytes");
  }
  return out;
}

std::vector<std::string> expand_text_paths(const std::vector<std::string>& entries, const std::string& dflt) {
  if (entries.empty()) return expand_text_glob(dflt);
  std::vector<std::string> files;
  for (const std::string& p : entries) {
    if (p.find_first_of("*?[") == std::string::npos)
      files.push_back(p);
    else
      for (std::string& f : expand_text_glob(p)) files.push_back(std::move(f));
  }
  return files;
}

TextDataset::TextDataset(Options opts) : opts_(std::move(opts)) {
  files_ = expand_text_paths(opts_.paths, opts_.glob);
  corpus_ = std::make_shared<const std::vector<uint8_t>>(read_files(files_));
  init();
}

TextDataset::TextDataset(std::shared_ptr<const std::vector<uint8_t>> corpus, Options opts)
    : opts_(std::move(opts)), corpus_(std::move(corpus)) {
  TR_CHECK(corpus_ != nullptr, "TextDataset: null corpus");
  files_ = opts_.paths;
  init();
}

void TextDataset::init() {
  const int64_t T = opts_.block_size;
  TR_CHECK(T >= 1, "TextDataset: block_size must be >= 1, got ", T);
  TR_CHECK(opts_.eval_fraction >= 0.0 && opts_.eval_fraction < 1.0,
           "TextDataset: eval_fraction must be in [0, 1), got ", opts_.eval_fraction);
  const int64_t n = int64_t(corpus_->size());
  const int64_t n_eval = int64_t(double(n) * opts_.eval_fraction);
  const int64_t split = n - n_eval;
  begin_ = opts_.train ? 0 : split;
  end_ = opts_.train ? split : n;
  const int64_t m = end_ - begin_;
  // A window needs T + 1 tokens (x and its one-step shift y).
  TR_CHECK(m >= T + 1, "TextDataset: the ", opts_.train ? "train" : "eval", " split has ", m,
           " tokens, fewer than block_size + 1 = ", T + 1, " (corpus of ", n, " bytes from ", files_.size(),
           " files, eval_fraction ", opts_.eval_fraction, ")");
  set_windows(T, opts_.overlapping, {m});  // one stream: the split's tokens
}

void TextDataset::read_tokens(int64_t /*segment: the only one*/, int64_t start, int64_t n, int64_t* out) const {
  const uint8_t* t = tokens() + start;
  for (int64_t k = 0; k < n; ++k) out[k] = t[k];
}

std::string TextDataset::describe() const {
  return str("TextDataset(", opts_.train ? "train" : "eval", ": ", num_tokens(), " of ", corpus_tokens(),
             " byte tokens, ", files_.size(), " files", opts_.paths.empty() ? str(" from '", opts_.glob, "'") : "",
             ", ", describe_windows(), ")");
}

namespace {

DatasetSplits build_text(const TomlTable& t, const DatasetContext& ctx) {
  TextDataset::Options o;
  o.paths = t.get_strings("paths", {});
  o.block_size = t.get_int("block_size", o.block_size);
  o.eval_fraction = t.get_float("eval_fraction", o.eval_fraction);
  if (!(o.eval_fraction > 0 && o.eval_fraction < 1)) t.fail("eval_fraction", "must be in (0, 1)");
  if (ctx.input_shape != Shape{o.block_size})
    t.fail("block_size", str("is ", o.block_size, ", but the model expects per-sample input ", ctx.input_shape,
                             " (set the model's input to [block_size])"));
  auto train = std::make_shared<TextDataset>(o);
  o.train = false;
  DatasetSplits s;
  s.eval = std::make_shared<TextDataset>(train->corpus(), o);
  s.train = train;
  return s;
}

}  // namespace

TR_REGISTER_DATASET("text", {build_text,
                             "paths (files or globs; default: Debian's fortunes), block_size = 128, "
                             "eval_fraction = 0.1"});

}  // namespace tr::data
