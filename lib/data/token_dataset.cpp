#include "data/token_dataset.h"
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include "core/error.h"
#include "data/data_state.h"
#include "data/dataset_registry.h"
#include "data/shard_paths.h"

namespace tr::data {

namespace {

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// "nanogpt", "llmc v1" (uint16) or "llmc v2" (uint32)
std::string layout(const TokenFileView& v) {
  return v.format == "llmc" ? (v.width == 2 ? "llmc v1" : "llmc v2") : v.format;
}

}  // namespace

TokenDataset::TokenDataset(Options opts) : opts_(std::move(opts)) {
  const int64_t T = opts_.block_size;
  TR_CHECK(T > 0, "TokenDataset: block_size must be positive, got ", T);
  TR_CHECK(!opts_.paths.empty(), "TokenDataset: no token files");
  // headers and sizes only: the pages of the tokens are read when a window needs them
  std::vector<int64_t> counts;
  shards_.reserve(opts_.paths.size());
  for (const std::string& p : opts_.paths) {
    TokenShard s;
    s.path = p;
    s.bytes = map_file(p, "TokenDataset", MapPages::on_demand);
    s.view = parse_token_file(s.bytes.data, s.bytes.size, p, opts_.format);
    counts.push_back(s.view.count);
    num_tokens_ += s.view.count;
    shards_.push_back(std::move(s));
  }
  set_windows(T, opts_.overlapping, counts);
  if (size() > 0) return;
  if (shards_.size() == 1)
    throw Error(str("token file ", shards_[0].path, ": ", counts[0], " tokens are fewer than one window of ",
                    "block_size + 1 = ", T + 1));
  const size_t big = size_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
  throw Error(str("token files: none of the ", shards_.size(), " shards holds one window of block_size + 1 = ", T + 1,
                  " tokens (the largest, ", shards_[big].path, ", has ", counts[big], ")"));
}

void TokenDataset::read_tokens(int64_t segment, int64_t start, int64_t n, int64_t* out) const {
  const TokenShard& s = shards_[size_t(segment)];
  for (int64_t k = 0; k < n; ++k) out[k] = s.view.at(start + k);
  if (opts_.vocab_size <= 0) return;
  for (int64_t k = 0; k < n; ++k)
    if (out[k] >= opts_.vocab_size) bad_token(s, start + k, out[k]);
}

void TokenDataset::bad_token(const TokenShard& s, int64_t at, int64_t token) const {
  const int64_t byte = int64_t(s.view.tokens - s.bytes.data) + at * s.view.width;
  throw Error(str("token file ", s.path, ": token ", at, " is ", token, ", outside the model's vocabulary of ",
                  opts_.vocab_size, " (at byte ", byte, "; a file of another tokenizer?)"));
}

std::vector<const TokenShard*> TokenDataset::short_shards() const {
  std::vector<const TokenShard*> r;
  for (const TokenShard& s : shards_)
    if (windows_in(s.view.count) == 0) r.push_back(&s);
  return r;
}

std::string TokenDataset::describe() const {
  const size_t n_short = short_shards().size();
  const std::string unused = n_short == 0 ? std::string()
                                          : str("; ", n_short,
                                                n_short == 1 ? " shard is shorter than block_size + 1 and gives none"
                                                             : " shards are shorter than block_size + 1 and give none");
  if (shards_.size() == 1) {
    const TokenShard& s = shards_[0];
    return str("TokenDataset('", s.path, "', ", layout(s.view), ", ", s.view.count, " tokens of ", s.view.width * 8,
               " bits, ", describe_windows(), ")");
  }
  std::vector<std::pair<std::string, int>> layouts;  // in order of first appearance
  for (const TokenShard& s : shards_) {
    const std::string l = layout(s.view);
    auto it = std::find_if(layouts.begin(), layouts.end(), [&](const auto& e) { return e.first == l; });
    if (it == layouts.end())
      layouts.emplace_back(l, 1);
    else
      ++it->second;
  }
  std::string kinds;
  for (const auto& [l, k] : layouts) kinds += str(kinds.empty() ? "" : ", ", k, " ", l);
  return str("TokenDataset(", shards_.size(), " shards '", shards_.front().path, "' .. '",
             file_name(shards_.back().path), "' (", kinds, "), ", num_tokens_, " tokens, ", describe_windows(), unused,
             ")");
}

std::string TokenDataset::locate(int64_t i) const {
  const Place p = window_place(i);
  return nlohmann::json{
      {"window", i}, {"shard", p.segment}, {"file", file_name(shards_[size_t(p.segment)].path)}, {"offset", p.start}}
      .dump();
}

std::string TokenDataset::shards_state() const {
  nlohmann::json list = nlohmann::json::array();
  for (const TokenShard& s : shards_) list.push_back({{"file", file_name(s.path)}, {"tokens", s.view.count}});
  return nlohmann::json{{kTokenShardsKey, list}}.dump();
}

namespace {

// The files of `key`: a path, a glob or a list of them. A single string is read (and recorded in the
// resolved config) as the string it is, so that configs of one file compare as they did before shards.
std::vector<std::string> shard_files(const TomlTable& t, const std::string& key, const DatasetContext& ctx) {
  const toml::node* n = t.node(key);
  const std::vector<std::string> entries =
      n && n->is_string() ? std::vector<std::string>{t.get_string(key)} : t.get_strings(key);
  try {
    return expand_shard_paths(entries, ctx.config_dir);
  } catch (const Error& e) { t.fail(key, e.what()); }
}

// A warning naming the shards too short for one window (they are read as if absent).
void note_short_shards(const TokenDataset& d, const std::string& key, std::vector<std::string>& notes) {
  const std::vector<const TokenShard*> s = d.short_shards();
  if (s.empty()) return;
  std::string names;
  for (size_t i = 0; i < s.size() && i < 5; ++i)
    names += str(i ? ", " : "", s[i]->path, " (", s[i]->view.count, " tokens)");
  if (s.size() > 5) names += str(" and ", s.size() - 5, " more");
  notes.push_back(str("[data] ", key, ": ", s.size(), " of ", d.shards().size(),
                      " token files hold fewer than block_size + 1 = ", d.block_size() + 1,
                      " tokens and give no window: ", names));
}

DatasetSplits build_tokens(const TomlTable& t, const DatasetContext& ctx) {
  TokenDataset::Options o;
  o.format = t.get_choice("format", {"auto", "nanogpt", "llmc"}, o.format);
  o.block_size = t.get_int("block_size", o.block_size);
  o.overlapping = t.get_bool("overlapping", o.overlapping);
  o.vocab_size = t.get_int("vocab_size", ctx.vocab_size);
  if (ctx.vocab_size > 0 && o.vocab_size != ctx.vocab_size)
    t.fail("vocab_size", str("is ", o.vocab_size, ", but the model's embedding has ", ctx.vocab_size, " rows"));
  if (ctx.input_shape != Shape{o.block_size})
    t.fail("block_size", str("is ", o.block_size, ", but the model expects per-sample input ", ctx.input_shape,
                             " (set the model's input to [block_size])"));
  o.paths = shard_files(t, "train", ctx);
  auto train = std::make_shared<TokenDataset>(o);
  o.paths = shard_files(t, "eval", ctx);
  auto eval = std::make_shared<TokenDataset>(o);
  DatasetSplits s;
  note_short_shards(*train, "train", s.notes);
  note_short_shards(*eval, "eval", s.notes);
  s.state = train->shards_state();  // a resume on other training shards is refused
  s.train = train;
  s.eval = eval;
  return s;
}

}  // namespace

TR_REGISTER_DATASET("tokens", {build_tokens,
                               "train, eval (a token file, a glob or a list of them: nanoGPT's uint16 "
                               ".bin, llm.c's headered .bin of uint16 or uint32 tokens), format = auto, "
                               "block_size = 128, overlapping = false, vocab_size (default: the "
                               "model's embedding rows)"});

}  // namespace tr::data
