// Data files through the real binary: `trainer pack --tokens` and dataset = "tokens" give the text
// reader's run on the same bytes (configs/gpt_char_tokens.toml against gpt_char.toml).
#include "integration/cli_harness.h"

namespace test_data_formats {

using namespace it;

TEST_CASE("tokens: packed fortunes train gpt_char exactly as the text reader does", "[integration][tokens]") {
  fs::path d = fresh_dir("tokens");
  Result p = trainer(d, "pack --tokens data/fortunes --format llmc");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("data/fortunes/train.bin") && Contains("data/fortunes/val.bin") && Contains("(llmc)"));
  const std::string args =
      " --set run.out_dir=runs --set train.steps=6 --set train.eval_every=3 "
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
  Result v = trainer(d, "run tok.toml --set run.name=v --set model.file='" + kRepo +
                            "/models/gpt_char.toml' "
                            "--set data.vocab_size=100" +
                            args);
  CHECK(v.code != 0);
  CHECK_THAT(v.out, Contains("vocab_size") && Contains("the model's embedding has 256 rows"));
}

TEST_CASE("csv: the rings table trains, resumes exactly, and a changed table is refused on resume",
          "[integration][csv]") {
  fs::path d = fresh_dir("csv");
  fs::create_directories(d / "data");
  fs::copy_file(kRepo + "/configs/data/rings.csv", d / "data/rings.csv");
  fs::copy_file(kRepo + "/configs/tabular_rings.toml", d / "t.toml");
  const std::string args = " --set train.epochs=3 --set log.progress=none";
  Result a = trainer(d, "run t.toml --set run.name=straight" + args);
  INFO(a.out);
  REQUIRE(a.code == 0);
  const std::vector<double> acc = metric_values(read(d / "runs/straight/metrics.jsonl"), "eval", "accuracy");
  REQUIRE(acc.size() == 3);
  CHECK(acc.back() > 0.8);
  REQUIRE(trainer(d, "run t.toml --set run.name=resumed --stop-at-step 50" + args).code == 0);
  Result b = trainer(d, "run t.toml --set run.name=resumed --resume auto" + args);
  REQUIRE(b.code == 0);
  CHECK(strip_timing(read(d / "runs/straight/metrics.jsonl")) == strip_timing(read(d / "runs/resumed/metrics.jsonl")));
  // the table changed under the checkpoint: its statistics differ, the resume is refused
  REQUIRE(trainer(d, "run t.toml --set run.name=changed --stop-at-step 20" + args).code == 0);
  std::string table = read(d / "data/rings.csv");
  write(d / "data/rings.csv", table + "1500,1000,1000,0,0,inner\r\n");  // one more row: another split, other means
  Result c = trainer(d, "run t.toml --set run.name=changed --resume auto" + args);
  CHECK(c.code != 0);
  CHECK_THAT(c.out, Contains("the training data gives other statistics than the checkpoint's"));
  // a cell that is not a number names the file and the record
  write(d / "data/rings.csv", table.replace(table.find("45.6051"), 7, "n/a"));
  Result e = trainer(d, "run t.toml --set run.name=bad" + args);
  CHECK(e.code != 0);
  CHECK_THAT(e.out, Contains("rings.csv: record 1 (line 2), column 'x': 'n/a' is not a finite number"));
}

TEST_CASE("recordio: packed Fashion-MNIST trains byte-identically to the IDX files", "[integration][recordio]") {
  fs::path d = fresh_dir("recordio");
  Result p = trainer(d, "pack --recordio data/fmnist");
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("data/fmnist_train.rec and data/fmnist_train.idx: 60000 images of 784 bytes"));
  fs::copy_file(kRepo + "/configs/fmnist_mlp_recordio.toml", d / "r.toml");
  const std::string args =
      " --set run.out_dir=runs --set train.steps=60 --set train.log_every=10 --set train.eval_every=30 "
      "--set log.progress=none --set checkpoint.save_final=false --set checkpoint.every_epoch=false";
  Result r = trainer(d, "run r.toml --set run.name=rio --set model.file='" + kRepo + "/models/mlp_fmnist.toml'" + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(trainer(d, "run '" + kRepo + "/configs/fmnist_mlp.toml' --set run.name=idx" + args).code == 0);
  const std::string mr = strip_timing(read(d / "runs/rio/metrics.jsonl")),
                    mi = strip_timing(read(d / "runs/idx/metrics.jsonl"));
  CHECK(metric_values(mr, "train", "loss").size() == 6);
  CHECK(mr == mi);
  // one meaning for mem_peak_mb: the dataset's own samples are not the step's memory, whether the
  // file is mapped (IDX) or decoded into memory (RecordIO: 47 MB of images, counted before); a
  // batch prefetched more or less is 0.4 MB
  const auto pr = metric_values(read(d / "runs/rio/metrics.jsonl"), "train", "mem_peak_mb");
  const auto pi = metric_values(read(d / "runs/idx/metrics.jsonl"), "train", "mem_peak_mb");
  REQUIRE(pr.size() == pi.size());
  for (size_t i = 0; i < pr.size(); ++i) CHECK(std::abs(pr[i] - pi[i]) <= 1.0);
}

TEST_CASE("image_folder: trains from PNG and JPEG files, a folder packed as RecordIO gives the same batches",
          "[integration][image]") {
  fs::path d = fresh_dir("image_folder");
  const std::string root = kRepo + "/tests/fixtures/image_folder";
  const std::string model =
      "[model]\ninput = [3, 5, 6]\n[[model.layers]]\ntype = \"flatten\"\n[[model.layers]]\n"
      "type = \"linear\"\nout_features = 2\n";
  write(d / "f.toml", "[run]\nseed = 1\n" + model + "[data]\ndataset = \"image_folder\"\ntrain = '" + root +
                          "/train'\neval = '" + root +
                          "/eval'\nnormalize = [0.5, 0.25]\nbatch_size = 2\nworkers = 2\n"
                          "[train]\nepochs = 3\nlog_every = 1\n[log]\nprogress = \"none\"\n");
  Result f = trainer(d, "run f.toml --set run.name=folder");
  INFO(f.out);
  REQUIRE(f.code == 0);
  Result p = trainer(d, "pack --recordio packed/train --folder '" + root + "/train'");
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("4 images of 2 classes"));
  REQUIRE(trainer(d, "pack --recordio packed/eval --folder '" + root + "/eval'").code == 0);
  write(d / "r.toml", "[run]\nseed = 1\n" + model +
                          "[data]\ndataset = \"recordio\"\ntrain = 'packed/train.rec'\n"
                          "eval = 'packed/eval.rec'\nnormalize = [0.5, 0.25]\nbatch_size = 2\nworkers = 2\n"
                          "[train]\nepochs = 3\nlog_every = 1\n[log]\nprogress = \"none\"\n");
  Result r = trainer(d, "run r.toml --set run.name=rec");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(strip_timing(read(d / "runs/folder/metrics.jsonl")) == strip_timing(read(d / "runs/rec/metrics.jsonl")));
  // a damaged image stops the run with its name
  fs::create_directories(d / "bad/cat");
  fs::create_directories(d / "bad/dog");
  write(d / "bad/cat/x.png", "\x89PNG\r\n\x1a\n but not really");
  fs::copy_file(root + "/train/dog/c.png", d / "bad/dog/c.png");
  Result b = trainer(d, "run f.toml --set run.name=bad --set data.train=bad --set data.eval=bad");
  CHECK(b.code != 0);
  CHECK_THAT(b.out, Contains("bad/cat/x.png") && Contains("PNG"));
}

}  // namespace test_data_formats
