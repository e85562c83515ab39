#include "train/checkpoint_state.h"
#include "core/error.h"

namespace tr::train {

using nlohmann::json;

json CheckpointState::to_json() const {
  const ProgressWindow& w = progress_window;
  return {
      {"format", 1},
      {"step", step},
      {"epoch", epoch},
      {"batch", batch},
      {"rng", {{"seed", rng.seed}, {"offset", rng.offset}}},
      {"optimizer", {{"type", optimizer_type}, {"param_groups", param_groups}, {"step_count", optimizer_step_count}}},
      {"scheduler", scheduler},
      {"scaler", scaler ? json{{"state", scaler->state}, {"skipped_steps", scaler->skipped_steps}} : json(nullptr)},
      {"ema", ema ? json{{"decay", ema->decay}, {"n_averaged", ema->n_averaged}} : json(nullptr)},
      {"progress_window",
       {{"loss_sum", w.loss_sum},
        {"norm_sum", w.norm_sum},
        {"samples", w.samples},
        {"steps", w.steps},
        {"norms", w.norms}}},
      {"metrics_lines", metrics_lines},
      {"nonfinite_skipped", nonfinite_skipped},
      {"data_state", data_state},
      {"data_position", data_position},
      {"world_size", world_size},
      {"best",
       best ? json{{"metric", best->metric}, {"value", best->value}, {"checkpoint", best->checkpoint}} : json(nullptr)},
      {"config", config},
  };
}

namespace {

// One object of state.json, its keys read by type; errors name the file and the key's path.
struct Reader {
  const json& j;
  std::string file, path;  // path: "" at the top, "rng." inside "rng"

  const json& at(const char* key) const {
    TR_CHECK(j.is_object(), file, ": '", path.empty() ? "(top)" : path.substr(0, path.size() - 1),
             "' must be a JSON object, found ", j.type_name());
    auto it = j.find(key);
    TR_CHECK(it != j.end(), file, ": missing key '", path, key, "'");
    return *it;
  }
  bool has(const char* key) const { return j.is_object() && j.contains(key) && !j.at(key).is_null(); }
  [[noreturn]] void wrong(const char* key, const char* expected, const json& v) const {
    throw Error(str(file, ": key '", path, key, "' must be ", expected, ", found ", v.type_name(),
                    v.is_primitive() ? " " + v.dump() : std::string()));
  }
  int64_t i64(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      wrong(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t count(const char* key) const {
    int64_t v = i64(key);
    if (v < 0) wrong(key, "a count (>= 0)", at(key));
    return v;
  }
  uint64_t u64(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_unsigned()) wrong(key, "an unsigned integer", v);
    return v.get<uint64_t>();
  }
  double f64(const char* key) const {
    const json& v = at(key);
    if (!v.is_number()) wrong(key, "a number", v);
    return v.get<double>();
  }
  std::string text(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) wrong(key, "a string", v);
    return v.get<std::string>();
  }
  Reader object(const char* key) const {
    const json& v = at(key);
    if (!v.is_object()) wrong(key, "an object", v);
    return Reader{v, file, path + key + "."};
  }
};

}  // namespace

CheckpointState CheckpointState::from_json(const json& j, const std::string& file) {
  Reader top{j, file, ""};
  TR_CHECK(j.is_object(), file, ": must be a JSON object, found ", j.type_name());
  TR_CHECK(j.contains("config"), file, ": the checkpoint holds weights only (no training state)");
  CheckpointState s;
  s.step = top.count("step");
  s.epoch = top.count("epoch");
  s.batch = top.count("batch");
  Reader rng = top.object("rng");
  s.rng = {rng.u64("seed"), rng.u64("offset")};
  Reader opt = top.object("optimizer");
  s.optimizer_type = opt.text("type");
  s.param_groups = opt.at("param_groups");
  if (!s.param_groups.is_array()) opt.wrong("param_groups", "a list", s.param_groups);
  s.optimizer_step_count = opt.count("step_count");
  s.scheduler = top.at("scheduler");
  if (top.has("scaler")) {
    Reader sc = top.object("scaler");
    s.scaler = Scaler{sc.at("state"), sc.count("skipped_steps")};
  }
  if (top.has("ema")) {
    Reader e = top.object("ema");
    s.ema = Ema{e.f64("decay"), e.count("n_averaged")};
  }
  Reader w = top.object("progress_window");
  s.progress_window = {w.f64("loss_sum"), w.f64("norm_sum"), w.count("samples"), w.count("steps"), w.count("norms")};
  s.metrics_lines = top.count("metrics_lines");
  // keys later versions added: absent in older checkpoints
  s.nonfinite_skipped = top.has("nonfinite_skipped") ? top.count("nonfinite_skipped") : 0;
  if (top.has("data_state")) s.data_state = top.at("data_state");
  if (top.has("data_position")) s.data_position = top.object("data_position").j;
  s.world_size = top.has("world_size") ? top.count("world_size") : 1;
  if (top.has("best")) {
    Reader b = top.object("best");
    s.best = Best{b.has("metric") ? b.text("metric") : std::string(), b.f64("value"), b.text("checkpoint")};
  }
  s.config = top.text("config");
  return s;
}

}  // namespace tr::train
