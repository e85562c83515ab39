#include "config/run_config.h"
#include <filesystem>
#include <sstream>
#include <type_traits>
#include "core/error.h"
#include "data/dataset_registry.h"
#include "nn/activation_checkpoint.h"
#include "nn/loss.h"
#include "optim/optimizer_registry.h"
#include "toml/toml_table.h"

namespace tr::config {

namespace fs = std::filesystem;

void apply_override(toml::table& root, const std::string& assignment) {
  auto eq = assignment.find('=');
  TR_CHECK(eq != std::string::npos && eq > 0, "--set '", assignment, "': expected section.key=value");
  std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  TR_CHECK(parts.size() >= 2, "--set '", assignment, "': the key must name a section and a key, e.g. train.epochs=3");
  toml::table* t = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = t->get(parts[i]);
    if (!n) {
      t->insert(parts[i], toml::table{});
      n = t->get(parts[i]);
    }
    TR_CHECK(n->is_table(), "--set '", assignment, "': '", parts[i], "' is not a table");
    t = n->as_table();
  }
  // the value as TOML (3, 0.1, true, "x", [1, 2]); anything that does not parse is a string. Its
  // source is the argument, which errors about it name (toml_location).
  const std::string source = kOverrideSource + assignment;
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value, source);
  } catch (const toml::parse_error&) {
    try {
      parsed = toml::parse("v = '''" + value + "'''", source);
    } catch (const toml::parse_error&) { parsed.insert("v", value); }
  }
  t->insert_or_assign(parts.back(), std::move(*parsed.get("v")));
}

namespace {

// A section of the config as a TomlTable (an empty one when absent); not a table is an error.
TomlTable section(const RunConfig& c, const TomlTable& top, const char* name) {
  static const toml::table empty;
  const toml::node* n = c.source->get(name);
  if (n && !n->is_table()) top.fail(name, "must be a table");
  return TomlTable(n ? *n->as_table() : empty, c.path, str("[", name, "]"));
}

// Reads the declared keys of `table` (run_config_keys.def) into `s`, in the declaration's order.
template <typename S> void read_keys(S& s, const TomlTable& t, std::string_view table, const RunConfig& c) {
  const KeyContext ctx{fs::path(c.path).parent_path().string()};
#define TR_KEY(Struct, tbl, member, key, Type, dflt, check, doc) \
  if constexpr (std::is_same_v<S, Struct>)                       \
    if (table == tbl) s.member = keys::Type::read(t, key, keys::initial<keys::Type::value_type>(dflt), check, ctx);
#include "config/run_config_keys.def"
}

void load_run(RunConfig& c, const TomlTable& t) {
  read_keys(c.run, t, "run", c);
  if (!t.has("name")) c.run.name = fs::path(c.path).stem().string();
  TR_CHECK(!c.run.name.empty() && c.run.name.find('/') == std::string::npos, c.path, ": [run] name '", c.run.name,
           "' must be a non-empty name without '/'");
  t.finish();
}

}  // namespace

TomlTable inline_model_table(const RunConfig& c) {
  TomlTable t(*c.model.inline_model, c.path, "[model]");
  // the run config's keys, but file: an inline model has none, and its errors should not suggest one
  for (const KeyDoc& k : key_docs())
    if (k.table == "model" && k.key != "file") t.has(k.key);
  return t;
}

namespace {

void load_model(RunConfig& c, const TomlTable& t) {
  read_keys(c.model, t, "model", c);
  for (const char* k : {"strict", "prefix", "init_format"})
    if (c.model.init.empty() && t.has(k))
      t.fail(k, "applies to starting weights: set init = \"weights.safetensors\" too");
  if (t.has("file")) {
    t.finish();
    return;
  }
  TR_CHECK(t.has("layers"), c.path, ": [model] needs either file = \"models/....toml\" or the layers inline");
  c.model.is_inline = true;
  c.model.inline_model = c.source->get("model")->as_table();
}

// The common keys; the dataset's keys and transforms are read by their builders at setup.
void load_data(RunConfig& c, const TomlTable& t) {
  read_keys(c.data, t, "data", c);
  if (t.has("micro_batch_size") && t.has("batch_size"))
    t.fail("micro_batch_size",
           "and batch_size are two ways to size a micro-step (per rank, or the global batch): "
           "give one");
  c.data.table = t;
}

void load_optimizer(RunConfig& c, TomlTable t) {
  auto& o = c.optimizer;
  t.record_into(o.resolved);
  read_keys(o, t, "optimizer", c);
  o.hyperparameters = optim::read_hyperparameters(t, o.type, /*with_defaults=*/true);
  t.finish();
}

void load_scheduler(RunConfig& c, const TomlTable& top) {
  if (const toml::node* n = c.source->get("scheduler")) {
    if (!n->is_table()) top.fail("scheduler", "must be a table");
    c.scheduler.table = n->as_table();
  }
}

void load_loss(RunConfig& c, const TomlTable& t) {
  read_keys(c.loss, t, "loss", c);
  c.loss.table = t;
}

void load_train(RunConfig& c, const TomlTable& t) {
  auto& tr = c.train;
  read_keys(tr, t, "train", c);
  if (tr.epochs <= 0 && tr.steps <= 0) t.fail("epochs", "and steps: one of them must be positive");
  if (t.has("tokens_per_step") && t.has("accumulate"))
    t.fail("tokens_per_step",
           "sets the accumulation count (tokens_per_step / (batch x tokens per sample)); give it "
           "or accumulate, not both");
  if (auto gc = t.get_table("grad_clip")) {
    read_keys(tr.grad_clip, *gc, "train.grad_clip", c);
    gc->finish();
  }
  t.finish();
}

void load_log(RunConfig& c, const TomlTable& t) {
  read_keys(c.log, t, "log", c);
  if (c.log.histograms_every > 0 && !c.log.tensorboard)
    t.fail("histograms_every", "writes TensorBoard histograms: set [log] tensorboard = true too");
  t.finish();
}

void load_checkpoint(RunConfig& c, const TomlTable& t) {
  read_keys(c.checkpoint, t, "checkpoint", c);
  if (c.checkpoint.keep_best == "eval.accuracy" && !Registry<nn::LossType>::get().at(c.loss.type).classification)
    t.fail("keep_best", str("needs an accuracy, and [loss] type = '", c.loss.type, "' is no classification loss"));
  t.finish();
}

void load_dist(RunConfig& c, const TomlTable& t) {
  read_keys(c.dist, t, "dist", c);
  t.finish();
}

void load_amp(RunConfig& c, const TomlTable& t) {
  auto& a = c.amp;
  read_keys(a, t, "amp", c);
  std::optional<TomlTable> s = t.get_table("scaler");
  if (s) {
    read_keys(a, *s, "amp.scaler", c);
    s->finish();
  }
  if (!s || !s->has("enabled")) a.scaler = a.dtype == "fp16";  // fp16's range needs it, bf16's does not
  t.finish();
}

RunConfig make_run_config(std::shared_ptr<toml::table> parsed, const std::string& path,
                          const std::vector<std::string>& overrides) {
  for (auto& o : overrides) apply_override(*parsed, o);
  RunConfig c;
  c.path = path;
  c.source = parsed;
  TomlTable top(*parsed, path, "run config");
  for (const char* s :
       {"run", "model", "data", "optimizer", "scheduler", "loss", "train", "log", "checkpoint", "dist", "amp"})
    top.has(s);
  top.finish();
  load_run(c, section(c, top, "run"));
  load_model(c, section(c, top, "model"));
  load_data(c, section(c, top, "data"));
  load_optimizer(c, section(c, top, "optimizer"));
  load_scheduler(c, top);
  load_loss(c, section(c, top, "loss"));
  load_train(c, section(c, top, "train"));
  load_log(c, section(c, top, "log"));
  load_checkpoint(c, section(c, top, "checkpoint"));
  load_dist(c, section(c, top, "dist"));
  load_amp(c, section(c, top, "amp"));
  return c;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  return make_run_config(std::make_shared<toml::table>(parse_toml_file(path)), path, overrides);
}

RunConfig parse_run_config(std::string_view text, const std::string& path, const std::vector<std::string>& overrides) {
  return make_run_config(std::make_shared<toml::table>(parse_toml_text(text, path)), path, overrides);
}

namespace {

// The declared keys of `table` in `s` as TOML (run_config_keys.def; each kind leaves out what is unset).
template <typename S> toml::table keys_toml(const S& s, std::string_view table) {
  toml::table out;
#define TR_KEY(Struct, tbl, member, key, Type, dflt, check, doc) \
  if constexpr (std::is_same_v<S, Struct>)                       \
    if (table == tbl) keys::Type::write(out, key, s.member);
#include "config/run_config_keys.def"
  return out;
}

// Copies every entry of `from` into `to`.
void merge_into(toml::table& to, const toml::table& from) {
  for (auto&& [k, v] : from) v.visit([&, key = std::string(k.str())](auto&& x) { to.insert_or_assign(key, x); });
}

toml::table model_toml(const ModelSection& m) {
  if (m.is_inline) return *m.inline_model;
  toml::table model = keys_toml(m, "model");
  // the starting weights' keys only with starting weights, and a format only when it is not torch's
  if (m.init.empty())
    for (const char* k : {"strict", "prefix", "init_format"}) model.erase(k);
  if (m.init_format == "torch") model.erase("init_format");
  return model;
}

toml::table data_toml(const DataSection& d) {
  toml::table data = keys_toml(d, "data");
  if (d.micro_batch_size > 0) data.erase("batch_size");  // one of the two ways to size a micro-step
  merge_into(data, d.resolved);
  return data;
}

toml::table train_toml(const TrainSection& t) {
  toml::table r = keys_toml(t, "train");
  if (t.tokens_per_step > 0) r.erase("accumulate");  // one of the two ways to size a step
  if (t.grad_clip.max_norm > 0 || t.grad_clip.value > 0)
    r.insert("grad_clip", keys_toml(t.grad_clip, "train.grad_clip"));
  return r;
}

toml::table amp_toml(const AmpSection& a) {
  toml::table amp = keys_toml(a, "amp");
  amp.insert("scaler", keys_toml(a, "amp.scaler"));
  return amp;
}

}  // namespace

std::string to_toml(const RunConfig& c) {
  toml::table root;
  root.insert("run", keys_toml(c.run, "run"));
  root.insert("model", model_toml(c.model));
  root.insert("data", data_toml(c.data));
  toml::table optimizer = keys_toml(c.optimizer, "optimizer");
  merge_into(optimizer, c.optimizer.resolved);  // the type's hyperparameters
  root.insert("optimizer", std::move(optimizer));
  if (c.scheduler.enabled()) root.insert("scheduler", *c.scheduler.table);
  if (!c.loss.resolved.empty()) {  // once the loss is built: its type and what its builder read
    toml::table loss = keys_toml(c.loss, "loss");
    merge_into(loss, c.loss.resolved);
    root.insert("loss", std::move(loss));
  }
  root.insert("train", train_toml(c.train));
  root.insert("log", keys_toml(c.log, "log"));
  root.insert("checkpoint", keys_toml(c.checkpoint, "checkpoint"));
  root.insert("dist", keys_toml(c.dist, "dist"));
  root.insert("amp", amp_toml(c.amp));
  std::ostringstream os;
  os << "# resolved config of run '" << c.run.name << "' (from " << c.path << ")\n" << root << "\n";
  return os.str();
}

}  // namespace tr::config
