// The kinds a config names, through the real binary: `trainer list`, the [loss] section (default,
// non-default keys, a regression loss without accuracy, errors), the resolved config, and a
// checkpoint written before [loss] existed resuming exactly.
#include <sstream>
#include "integration/cli_harness.h"

namespace test_kinds {

using namespace it;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> r;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) r.push_back(l);
  return r;
}

}  // namespace

TEST_CASE("trainer list prints every registered name of each kind with its keys", "[integration][registry]") {
  fs::path d = fresh_dir("list");
  Result all = trainer(d, "list");
  INFO(all.out);
  REQUIRE(all.code == 0);
  for (const char* kind :
       {"layers (", "ops (", "optimizers (", "schedulers (", "datasets (", "transforms (", "losses (", "keys ("})
    CHECK_THAT(all.out, Contains(kind));
  Result opt = trainer(d, "list optimizers");
  INFO(opt.out);
  REQUIRE(opt.code == 0);
  CHECK_THAT(opt.out, Contains("optimizers ([optimizer] type):"));
  CHECK(std::regex_search(opt.out, std::regex("\n  sgd +lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0, "
                                              "nesterov = false, maximize = false\n")));
  CHECK(std::regex_search(opt.out, std::regex("\n  adamw +lr = 0.001, betas = \\[0.9, 0.999\\], eps = 1e-08, "
                                              "weight_decay = 0.01")));
  CHECK_THAT(opt.out, !Contains("cosine"));
  CHECK_THAT(trainer(d, "list schedulers").out, Contains("onecycle") && Contains("max_lr (required"));
  CHECK_THAT(trainer(d, "list datasets").out, Contains("synthetic") && Contains("num_classes = 10"));
  CHECK_THAT(trainer(d, "list transforms").out, Contains("random_horizontal_flip") && Contains("p = 0.5"));
  CHECK_THAT(trainer(d, "list losses").out, Contains("cross_entropy") && Contains("label_smoothing = 0.0"));
  CHECK_THAT(trainer(d, "list layers").out, Contains("linear") && Contains("out_features"));
  CHECK(
      std::regex_search(trainer(d, "list ops").out, std::regex("\n  mm +2 inputs, kernels: cpu[ a-z]*, differentiable, "
                                                               "autocast: lower precision\n")));
  // the run config's fixed keys, from their one declaration (config/run_config_keys.def)
  Result keys = trainer(d, "list keys");
  INFO(keys.out);
  CHECK(std::regex_search(keys.out, std::regex("\n  train\\.epochs +integer = 1")));
  CHECK(std::regex_search(keys.out, std::regex("\n  checkpoint\\.keep_last +integer = 3")));
  Result bad = trainer(d, "list optimiser");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("unknown kind 'optimiser'; did you mean 'optimizers'?") && Contains("losses"));
}

TEST_CASE("[loss]: cross_entropy by default, its keys, a regression loss, errors", "[integration][losses]") {
  fs::path d = fresh_dir("loss");
  write(d / "syn.toml", kSyntheticConfig);
  Result a = trainer(d, "run syn.toml --set run.name=default --set log.progress=none");
  INFO(a.out);
  REQUIRE(a.code == 0);
  std::string cfg = read(d / "runs/default/config.toml");
  CHECK_THAT(cfg, Contains("[loss]\nignore_index = -100\nlabel_smoothing = 0.0\ntype = 'cross_entropy'\n"));
  // the same written out: the same run
  write(d / "explicit.toml",
        std::string(kSyntheticConfig) + "[loss]\ntype = \"cross_entropy\"\nlabel_smoothing = 0.0\n");
  Result e = trainer(d, "run explicit.toml --set run.name=explicit --set log.progress=none");
  REQUIRE(e.code == 0);
  CHECK(strip_timing(read(d / "runs/explicit/metrics.jsonl")) == strip_timing(read(d / "runs/default/metrics.jsonl")));

  // label smoothing: another loss curve, accuracy still reported
  Result s = trainer(d, "run syn.toml --set run.name=smooth --set log.progress=none --set loss.label_smoothing=0.2");
  INFO(s.out);
  REQUIRE(s.code == 0);
  std::string ms = read(d / "runs/smooth/metrics.jsonl"), md = read(d / "runs/default/metrics.jsonl");
  std::vector<double> ls = metric_values(ms, "eval", "loss"), ld = metric_values(md, "eval", "loss");
  REQUIRE(ls.size() == ld.size());
  CHECK(ls != ld);
  CHECK(metric_values(ms, "eval", "accuracy").size() == ls.size());
  CHECK_THAT(read(d / "runs/smooth/config.toml"), Contains("label_smoothing = 0.2"));

  // a regression loss: one output per sample against the class index, no accuracy anywhere
  std::string c = kSyntheticConfig;
  c.replace(c.find("out_features = 3"), 16, "out_features = 1");
  write(d / "mse.toml", c + "[loss]\ntype = \"mse\"\n");
  Result m = trainer(d, "run mse.toml --set log.progress=lines");
  INFO(m.out);
  REQUIRE(m.code == 0);
  std::string mm = read(d / "runs/mse/metrics.jsonl");
  CHECK(metric_values(mm, "eval", "loss").size() == 2);
  CHECK_THAT(mm, !Contains("accuracy"));
  CHECK_THAT(m.out, !Contains("accuracy"));
  std::vector<double> train = metric_values(mm, "train", "loss");
  CHECK(train.back() < train.front());
  CHECK_THAT(read(d / "runs/mse/config.toml"), Contains("[loss]\ntype = 'mse'\n"));
  Result me = trainer(d, "eval mse.toml --checkpoint runs/mse/checkpoints/final");
  CHECK(me.code == 0);
  CHECK_THAT(me.out, Contains("\"loss\":") && !Contains("accuracy"));
  // the final weights are a verifiable checkpoint directory, written like the others
  CHECK(trainer(d, "checkpoint verify runs/mse/checkpoints/final").code == 0);
  CHECK(read(d / "runs/mse/checkpoints/latest") != "final\n");

  SECTION("errors name the location, the nearest name and the known ones") {
    Result u = trainer(d, "run syn.toml --set loss.type=\\\"crossentropy\\\"");
    CHECK(u.code != 0);
    CHECK_THAT(u.out, Contains("unknown loss 'crossentropy'; did you mean 'cross_entropy'?") &&
                          Contains("(known: bce_with_logits, cross_entropy, mse)"));
    Result k = trainer(d, "run syn.toml --set loss.label_smothing=0.1");
    CHECK(k.code != 0);
    CHECK_THAT(k.out, Contains("unknown key 'label_smothing' in [loss]") && Contains("did you mean 'label_smoothing'"));
    Result b = trainer(d, "run mse.toml --set checkpoint.keep_best=\\\"eval.accuracy\\\"");
    CHECK(b.code != 0);
    CHECK_THAT(b.out, Contains("keep_best") && Contains("'mse' is no classification loss"));
    Result o = trainer(d, "run syn.toml --set optimizer.type=\\\"adamm\\\"");
    CHECK(o.code != 0);
    // the value came from --set: the error names the argument
    CHECK_THAT(o.out, Contains("--set optimizer.type=\"adamm\": [optimizer]") &&
                          Contains("unknown optimizer 'adamm'; did you mean 'adam'?"));
    Result ds = trainer(d, "run syn.toml --set data.dataset=\\\"synthetc\\\"");
    CHECK(ds.code != 0);
    CHECK_THAT(ds.out, Contains("unknown dataset 'synthetc'; did you mean 'synthetic'?"));
    Result dk = trainer(d, "run syn.toml --set data.block_size=64");  // a text dataset's key
    CHECK(dk.code != 0);
    CHECK_THAT(dk.out, Contains("unknown key 'block_size' in [data]"));
  }
}

TEST_CASE("a checkpoint written before [loss] existed resumes exactly", "[integration][checkpoint][losses]") {
  // tests/fixtures/checkpoint_before_loss: kSyntheticConfig stopped at step 10 by the trainer before
  // the registries (no [loss]; every optimizer's keys in [optimizer]; make_checkpoint_before_loss.sh)
  fs::path d = fresh_dir("old_checkpoint");
  write(d / "syn.toml", kSyntheticConfig);
  fs::create_directories(d / "runs/syn/checkpoints");
  fs::copy(kRepo + "/tests/fixtures/checkpoint_before_loss/step_10", d / "runs/syn/checkpoints/step_10",
           fs::copy_options::recursive);
  Result r = trainer(d, "run syn.toml --resume auto --set log.progress=lines");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("resumed at step 10") && !Contains("loss.") && !Contains("optimizer."));
  Result s = trainer(d, "run syn.toml --set run.name=straight --set log.progress=none");
  REQUIRE(s.code == 0);
  // The fixture's first 10 steps ran on another CPU, whose BLAS kernels round differently from
  // this one's, so the continuation is compared to a straight run here to f32 rounding, not bit
  // for bit (a lost or misread state, e.g. the momentum buffers, moves the losses by far more).
  // Bitwise resume on one machine is checked by the [checkpoint] tests.
  const std::string resumed = read(d / "runs/syn/metrics.jsonl"), straight = read(d / "runs/straight/metrics.jsonl");
  REQUIRE(lines_of(resumed).size() + 2 == lines_of(straight).size());
  for (const char* split : {"train", "eval"}) {
    std::vector<double> a = metric_values(resumed, split, "loss"), b = metric_values(straight, split, "loss");
    const size_t skip = b.size() - a.size();  // the lines the checkpoint already had
    REQUIRE(a.size() <= b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(split << " line " << i + skip);
      CHECK(a[i] == Approx(b[i + skip]).epsilon(1e-4));
    }
  }
  // a real change is still refused, with the old config's view of it
  Result c = trainer(
      d, "run syn.toml --set run.name=other --resume runs/syn/checkpoints/step_10 --set loss.label_smoothing=0.1");
  CHECK(c.code != 0);
  CHECK_THAT(c.out, Contains("loss.label_smoothing: (absent) -> 0.1"));
}

}  // namespace test_kinds
