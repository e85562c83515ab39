// CheckpointState: state.json as a typed value. A round trip keeps every field; a damaged file (a
// missing key, a wrong type, a negative count) is one error naming the file and the key's path.
#include <catch2/catch.hpp>
#include <functional>
#include "core/error.h"
#include "train/checkpoint_state.h"

namespace test_checkpoint_state {

using namespace tr;
using namespace tr::train;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

CheckpointState full_state() {
  CheckpointState s;
  s.step = 120;
  s.epoch = 2;
  s.batch = 7;
  s.rng = {0xFFFFFFFFFFFFFFF0ull, 12345};
  s.optimizer_type = "SGD";
  s.param_groups = json::array({{{"lr", 0.1}, {"params", {0, 1}}}});
  s.optimizer_step_count = 120;
  s.scheduler = {{"last_epoch", 3}};
  s.scaler = CheckpointState::Scaler{{{"scale", 1024.0}}, 2};
  s.ema = CheckpointState::Ema{0.999, 118};
  s.progress_window = {1.5, 0.25, 640, 5, 4};
  s.metrics_lines = 31;
  s.nonfinite_skipped = 1;
  s.data_state = {{"mean", {0.5}}};
  s.data_position = {{"window", 12}, {"shard", 1}, {"file", "train_001.bin"}, {"offset", 1536}};
  s.world_size = 2;
  s.best = CheckpointState::Best{"eval.loss", 0.31, "step_100"};
  s.config = "[run]\nseed = 0\n";
  return s;
}

}  // namespace

TEST_CASE("CheckpointState: to_json and from_json round-trip every field", "[checkpoint]") {
  const CheckpointState a = full_state();
  const CheckpointState b = CheckpointState::from_json(json::parse(a.to_json().dump()), "ck/state.json");
  CHECK(b.to_json() == a.to_json());
  CHECK(b.rng == a.rng);  // a seed above 2^63 stays unsigned
  CHECK(b.progress_window.samples == 640);
  REQUIRE(b.best);
  CHECK(b.best->checkpoint == "step_100");
  // a run without scaler, EMA, best or data state writes nulls, and reads them back as absent
  CheckpointState plain = full_state();
  plain.scaler.reset();
  plain.ema.reset();
  plain.best.reset();
  plain.data_state = nullptr;
  plain.data_position = nullptr;
  const CheckpointState c = CheckpointState::from_json(plain.to_json(), "ck/state.json");
  CHECK_FALSE(c.scaler);
  CHECK_FALSE(c.ema);
  CHECK_FALSE(c.best);
  CHECK(c.data_state.is_null());
  CHECK(c.data_position.is_null());
}

TEST_CASE("CheckpointState: a damaged state.json names the file and the key", "[checkpoint][errors]") {
  auto fails = [](const std::function<void(json&)>& damage) {
    json j = full_state().to_json();
    damage(j);
    try {
      CheckpointState::from_json(j, "ck/state.json");
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("(no error)");
  };
  CHECK_THAT(fails([](json& j) { j["rng"].erase("seed"); }), Contains("ck/state.json: missing key 'rng.seed'"));
  CHECK_THAT(fails([](json& j) { j["step"] = "120"; }),
             Contains("key 'step' must be a count") || Contains("key 'step' must be an integer"));
  CHECK_THAT(fails([](json& j) { j["step"] = -3; }), Contains("key 'step' must be a count (>= 0)"));
  CHECK_THAT(fails([](json& j) { j["epoch"] = 2.5; }), Contains("key 'epoch' must be an integer, found number 2.5"));
  CHECK_THAT(fails([](json& j) { j["rng"]["offset"] = -1; }), Contains("key 'rng.offset' must be an unsigned integer"));
  CHECK_THAT(fails([](json& j) { j["optimizer"]["param_groups"] = json::object(); }),
             Contains("key 'optimizer.param_groups' must be a list"));
  CHECK_THAT(fails([](json& j) { j["progress_window"] = 3; }), Contains("key 'progress_window' must be an object"));
  CHECK_THAT(fails([](json& j) { j["best"]["value"] = nullptr; }), Contains("key 'best.value' must be a number"));
  CHECK_THAT(fails([](json& j) { j["data_position"] = 12; }), Contains("key 'data_position' must be an object"));
  CHECK_THAT(fails([](json& j) { j.erase("config"); }), Contains("holds weights only"));
  CHECK_THAT(fails([](json& j) { j = json::array(); }), Contains("must be a JSON object"));
  // keys later versions added may be absent (an older checkpoint)
  CHECK(fails([](json& j) {
          j.erase("nonfinite_skipped");
          j.erase("world_size");
          j.erase("data_state");
          j.erase("data_position");
          j.erase("best");
        }) == "(no error)");
}

}  // namespace test_checkpoint_state
