// [log] tensorboard through the real binary: a run stopped and resumed writes one event file with
// the same scalars (timing aside) as an uninterrupted run, no (tag, step) twice, every metrics
// number as a scalar, histograms of weights and gradients, the config as text; and the config
// checks. The event framing is read here with the wire decoder alone (header-only): the writer's
// own reader is not trusted to judge it.
#include <cstring>
#include <map>
#include <set>
#include "integration/cli_harness.h"
#include "io/protobuf_wire.h"

namespace test_tensorboard {

using namespace it;

namespace {

struct EventFile {
  int files = 0;
  std::map<std::pair<std::string, int64_t>, float> scalars;  // (tag, step) -> value
  int duplicates = 0;
  std::set<std::string> histogram_tags, text_tags;
};

EventFile read_events(const fs::path& run_dir) {
  EventFile ef;
  std::string path;
  for (const auto& e : fs::directory_iterator(run_dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      ++ef.files;
      path = e.path().string();
    }
  if (path.empty()) return ef;
  const std::string all = read(path);
  size_t at = 0;
  while (at + 12 <= all.size()) {
    uint64_t n;
    std::memcpy(&n, all.data() + at, 8);
    REQUIRE(at + 16 + n <= all.size());
    const std::string_view event(all.data() + at + 12, size_t(n));
    at += 16 + size_t(n);
    int64_t step = 0;
    tr::io::pb::Reader e(event);
    std::string_view summary;
    while (auto f = e.next()) {
      if (f->field == 2) step = int64_t(f->number);
      if (f->field == 5) summary = f->bytes;
    }
    tr::io::pb::Reader s(summary);
    while (auto v = s.next()) {
      std::string tag;
      std::optional<float> value;
      bool histo = false, tensor = false;
      tr::io::pb::Reader fields(v->bytes);
      while (auto x = fields.next()) {
        if (x->field == 1) tag = std::string(x->bytes);
        if (x->field == 2) {
          float fv;
          std::memcpy(&fv, &x->number, 4);
          value = fv;
        }
        histo |= x->field == 5;
        tensor |= x->field == 8;
      }
      if (value) ef.duplicates += !ef.scalars.emplace(std::make_pair(tag, step), *value).second;
      if (histo) ef.histogram_tags.insert(tag);
      if (tensor) ef.text_tags.insert(tag);
    }
  }
  CHECK(at == all.size());
  return ef;
}

// the scalars without the timing ones, which differ between any two runs
std::map<std::pair<std::string, int64_t>, float> untimed(const EventFile& ef) {
  std::map<std::pair<std::string, int64_t>, float> m;
  for (const auto& [k, v] : ef.scalars)
    if (!std::regex_search(
            k.first,
            std::regex("/(samples_per_s|startup_s|peak_flops|mfu|mem_peak_mb|mem_reserved_mb|mem_peak_reserved_mb)$")))
      m[k] = v;
  return m;
}

}  // namespace

TEST_CASE("tensorboard: a stopped and resumed run writes one event file equal to an uninterrupted run's",
          "[integration][tensorboard]") {
  fs::path d = fresh_dir("tensorboard");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string args =
      "--set log.tensorboard=true --set log.histograms_every=4 --set checkpoint.every=5 --set train.epochs=2";
  Result a = trainer(d, "run syn.toml --set run.name=straight " + args);
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b1 = trainer(d, "run syn.toml --set run.name=resumed --stop-at-step 7 " + args);
  REQUIRE(b1.code == 0);
  Result b2 = trainer(d, "run syn.toml --set run.name=resumed --resume auto " + args);
  INFO(b2.out);
  REQUIRE(b2.code == 0);
  const EventFile sa = read_events(d / "runs/straight"), sb = read_events(d / "runs/resumed");
  CHECK(sa.files == 1);
  CHECK(sb.files == 1);
  CHECK(sa.duplicates == 0);
  CHECK(sb.duplicates == 0);
  CHECK(untimed(sa) == untimed(sb));
  // every number of every metrics line is a scalar at its step
  const std::string metrics = read(d / "runs/straight/metrics.jsonl");
  const std::vector<double> losses = metric_values(metrics, "train", "loss");
  REQUIRE(!losses.empty());
  int n_train = 0;
  for (const auto& [k, v] : sa.scalars) n_train += k.first == "train/loss";
  CHECK(n_train == int(losses.size()));
  const std::vector<double> acc = metric_values(metrics, "eval", "accuracy");
  std::vector<double> tb_acc;
  for (const auto& [k, v] : sa.scalars)
    if (k.first == "eval/accuracy") tb_acc.push_back(v);
  REQUIRE(tb_acc.size() == acc.size());
  for (size_t i = 0; i < acc.size(); ++i) CHECK(tb_acc[i] == float(acc[i]));
  CHECK(sa.scalars.count({"train/lr", 4}) == 1);
  CHECK(sa.scalars.count({"train/mem_peak_mb", 4}) == 1);
  CHECK(sa.histogram_tags.count("weights/0.weight") == 1);
  CHECK(sa.histogram_tags.count("grads/0.weight") == 1);
  CHECK(sa.histogram_tags == sb.histogram_tags);
  CHECK(sa.text_tags == std::set<std::string>{"config"});
}

TEST_CASE("tensorboard: histograms without the event file are a config error", "[integration][tensorboard][errors]") {
  fs::path d = fresh_dir("tensorboard_err");
  write(d / "syn.toml", kSyntheticConfig);
  Result r = trainer(d, "run syn.toml --set log.histograms_every=10");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("histograms_every") && Contains("tensorboard = true"));
}

}  // namespace test_tensorboard
