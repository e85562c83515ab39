#include "data/token_dataset.h"
#include <algorithm>
#include <filesystem>
#include "core/error.h"
#include "data/dataset_registry.h"

namespace tr::data {

TokenDataset::TokenDataset(Options opts) : opts_(std::move(opts)) {
  bytes_ = map_file(opts_.path, "TokenDataset");
  view_ = parse_token_file(bytes_.data, bytes_.size, opts_.path, opts_.format);
  const int64_t T = opts_.block_size;
  TR_CHECK(T > 0, "TokenDataset: block_size must be positive, got ", T);
  TR_CHECK(view_.count >= T + 1, "token file ", opts_.path, ": ", view_.count, " tokens are fewer than one window of ",
           "block_size + 1 = ", T + 1);
  for (int64_t i = 0; i < view_.count; ++i) {
    const int64_t t = view_.at(i);
    if (opts_.vocab_size > 0 && t >= opts_.vocab_size)
      throw Error(str("token file ", opts_.path, ": token ", i, " is ", t, ", outside the model's vocabulary of ",
                      opts_.vocab_size, " (a file of another tokenizer?)"));
    max_token_ = std::max(max_token_, t);
  }
  set_windows(T, opts_.overlapping, view_.count);
}

void TokenDataset::read_tokens(int64_t start, int64_t n, int64_t* out) const {
  for (int64_t k = 0; k < n; ++k) out[k] = view_.at(start + k);
}

std::string TokenDataset::describe() const {
  return str("TokenDataset('", opts_.path, "', ", view_.format, ", ", view_.count, " tokens of ", view_.width * 8,
             " bits, max ", max_token_, ", ", describe_windows(), ")");
}

namespace {

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
  auto resolve = [&](const std::string& key) { return resolve_path(t.get_string(key), ctx.config_dir); };
  DatasetSplits s;
  o.path = resolve("train");
  s.train = std::make_shared<TokenDataset>(o);
  o.path = resolve("eval");
  s.eval = std::make_shared<TokenDataset>(o);
  return s;
}

}  // namespace

TR_REGISTER_DATASET("tokens", {build_tokens, "train, eval (token files: nanoGPT's uint16 .bin or llm.c's headered "
                                             ".bin), format = auto, block_size = 128, overlapping = false, vocab_size "
                                             "(default: the model's embedding rows)"});

}  // namespace tr::data
