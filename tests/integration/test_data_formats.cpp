// Data files through the real binary: `trainer pack --tokens` and dataset = "tokens" give the text
// reader's run on the same bytes (configs/gpt_char_tokens.toml against gpt_char.toml).
#include "integration/cli_harness.h"

using namespace it;

TEST_CASE("tokens: packed fortunes train gpt_char exactly as the text reader does", "[integration][tokens]") {
  fs::path d = fresh_dir("tokens");
  Result p = trainer(d, "pack --tokens data/fortunes --format llmc");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("data/fortunes/train.bin") && Contains("data/fortunes/val.bin") && Contains("(llmc)"));
  const std::string args = " --set run.out_dir=runs --set train.steps=6 --set train.eval_every=3 "
                           "--set train.eval_batches=2 --set train.log_every=1 --set log.progress=none "
                           "--set checkpoint.save_final=false --set checkpoint.every_epoch=false";
  fs::copy_file(kRepo + "/configs/gpt_char_tokens.toml", d / "tok.toml");
  // the copy's model file is relative to configs/: point at the repository's
  Result t = trainer(d, "run tok.toml --set run.name=tok --set model.file='" + kRepo + "/models/gpt_char.toml'" + args);
  INFO(t.out);
  REQUIRE(t.code == 0);
  Result x = trainer(d, "run '" + kRepo + "/configs/gpt_char.toml' --set run.name=txt" + args);
  REQUIRE(x.code == 0);
  const std::string mt = read(d / "runs/tok/metrics.jsonl"), mx = read(d / "runs/txt/metrics.jsonl");
  CHECK(metric_values(mt, "train", "loss").size() == 6);
  CHECK(metric_values(mt, "train", "loss") == metric_values(mx, "train", "loss"));
  CHECK(metric_values(mt, "eval", "loss") == metric_values(mx, "eval", "loss"));
  // a model whose vocabulary the file does not fit
  Result v = trainer(d, "run tok.toml --set run.name=v --set model.file='" + kRepo + "/models/gpt_char.toml' "
                        "--set data.vocab_size=100" + args);
  CHECK(v.code != 0);
  CHECK_THAT(v.out, Contains("vocab_size") && Contains("the model's embedding has 256 rows"));
}
