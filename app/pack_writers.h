// What `trainer pack` writes: token files (app/pack_tokens.cpp) and RecordIO files
// (app/pack_recordio.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tr::app {

// The bytes of `inputs` (the text reader's files and order) as byte-level tokens, split as
// dataset = "text" splits them, into out/train.bin and out/val.bin: dataset = "tokens" over them
// sees exactly the text reader's windows. shard_tokens > 0: llm.c's shards (write_token_splits).
void pack_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& format,
                 double eval_fraction, int64_t shard_tokens);

// `inputs` (files or globs, in order; default Debian's fortunes) as GPT-2 BPE tokens, each file one
// document with <|endoftext|> before it (llm.c's data scripts: [eot] + encode_ordinary(doc)); the
// stream's last floor(n * eval_fraction) tokens are val. Vocabularies over 65536 are written as
// llm.c version 2.
void pack_bpe_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& tokenizer_dir,
                     const std::string& format, double eval_fraction, int64_t shard_tokens);

// The IDX splits of `dir` as MXNet RecordIO, OUT_train.rec/.idx and OUT_test.rec/.idx: one record
// per image in file order (IRHeader label, id = the image's index, the raw u8 pixels), the index's
// keys those ids.
void pack_recordio(const std::string& out, const std::string& dir);

// An image folder's files as records (their encoded bytes, IRHeader label = the class's index in
// ImageFolder's sorted order), OUT.rec and OUT.idx.
void pack_recordio_folder(const std::string& out, const std::string& dir);

}  // namespace tr::app
