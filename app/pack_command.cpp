// `trainer pack`: writes data files, token files (--tokens) or RecordIO (--recordio).
#include "app/commands.h"
#include "app/pack_writers.h"
#include "core/error.h"
#include "data/idx_dataset.h"

namespace tr::app {

PackCommand::PackCommand() : from(data::IdxDataset::kFashionMnistDir) {}

void PackCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("pack",
                               "write data files: --tokens (text as token files: bytes, or GPT-2 BPE with "
                               "--tokenizer) or --recordio (IDX images as MXNet RecordIO)");
  auto* tk = c->add_flag("--tokens", tokens,
                         "token files OUT/train.bin and OUT/val.bin: byte-level (the text "
                         "reader's split), or GPT-2 BPE with --tokenizer");
  auto* rc =
      c->add_flag("--recordio", recordio, "OUT_train.rec/.idx and OUT_test.rec/.idx from the IDX files in --from");
  tk->excludes(rc);
  c->add_option("--tokenizer", tokenizer,
                "--tokens: GPT-2 byte-level BPE from DIR/vocab.json and DIR/merges.txt; "
                "each input is a document, <|endoftext|> before each")
      ->needs(tk);
  c->add_option("--shard-tokens", shard_tokens,
                "--tokens: the train split as llm.c's shards of at most N tokens, "
                "OUT/train_000000.bin, ..., and val as OUT/val_000000.bin")
      ->needs(tk)
      ->check(CLI::PositiveNumber);
  c->add_option("--from", from,
                "--recordio: the directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "
                "(default: Debian's Fashion-MNIST)");
  c->add_option("--folder", folder,
                "--recordio: an image folder (<class>/<image>) instead: OUT.rec/.idx, the files' "
                "PNG or JPEG bytes as they are, the label the class's sorted position");
  c->add_option("out", out, "output directory (--tokens) or path prefix (--recordio)")->required();
  c->add_option("inputs", inputs, "text files or globs, in order (default: Debian's fortunes, as dataset = \"text\")");
  c->add_option("--format", format,
                "nanogpt (uint16 tokens alone) or llmc (llm.c's 256-int32 header, version 1); "
                "a vocabulary over 65536 is always llm.c version 2 (uint32)")
      ->check(CLI::IsMember({"nanogpt", "llmc"}));
  c->add_option("--eval-fraction", eval_fraction, "the corpus's tail written to val.bin")->check(CLI::Range(0.0, 0.99));
  c->callback([this] { execute(); });
}

void PackCommand::execute() const {
  TR_CHECK(tokens || recordio, "trainer pack: say what to write: --tokens or --recordio");
  if (tokens && !tokenizer.empty())
    pack_bpe_tokens(out, inputs, tokenizer, format, eval_fraction, shard_tokens);
  else if (tokens)
    pack_tokens(out, inputs, format, eval_fraction, shard_tokens);
  else if (!folder.empty())
    pack_recordio_folder(out, folder);
  else
    pack_recordio(out, from);
}

}  // namespace tr::app
