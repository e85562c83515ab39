#include "config/run_config.h"
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
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
    } catch (const toml::parse_error&) {
      parsed.insert("v", value);
    }
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

void load_run(RunConfig& c, const TomlTable& t) {
  c.run.name = t.get_string("name", fs::path(c.path).stem().string());
  c.run.out_dir = t.get_string("out_dir", c.run.out_dir);
  c.run.seed = t.get_int("seed", c.run.seed);
  c.run.device = t.get_string("device", c.run.device);
  if (c.run.device != "auto" && c.run.device != "cpu" && c.run.device.rfind("cuda", 0) != 0)
    t.fail("device", str("is '", c.run.device, "', expected auto, cpu, cuda or cuda:N"));
  c.run.threads = t.get_int("threads", c.run.threads);
  c.run.dtype = t.get_choice("dtype", {"float32", "float64"}, c.run.dtype);
  c.run.cudnn_benchmark = t.get_bool("cudnn_benchmark", c.run.cudnn_benchmark);
  c.run.deterministic = t.get_bool("deterministic", c.run.deterministic);
  if (t.has("allow_tf32")) c.run.allow_tf32 = t.get_bool("allow_tf32", false);
  c.run.fused_ops = t.get_bool("fused_ops", c.run.fused_ops);
  c.run.attention = t.get_choice("attention", {"auto", "fused", "composite"}, c.run.attention);
  TR_CHECK(!c.run.name.empty() && c.run.name.find('/') == std::string::npos, c.path, ": [run] name '", c.run.name,
           "' must be a non-empty name without '/'");
  t.finish();
}

// [model] init, init_format, strict, prefix: the starting weights (beside the model file or the inline layers).
void load_model_init(RunConfig& c, const TomlTable& t) {
  auto& m = c.model;
  // an inline model's [[model.init]] tables are its initialisation rules (nn/init_rules.h), read
  // by the model builder; a string is the starting weights
  const toml::node* init = t.node("init");
  if (init && !init->is_array()) m.init = resolve_path(t.get_string("init"), fs::path(c.path).parent_path().string());
  m.init_format = t.get_choice("init_format", {"torch", "gpt2_hf"}, m.init_format);
  m.strict = t.get_bool("strict", m.strict);
  if (const toml::node* p = t.node("prefix")) {
    if (p->is_string()) {
      m.prefix = {{p->value<std::string>().value(), ""}};
    } else if (const toml::table* pt = p->as_table()) {
      for (auto&& [from, to] : *pt) {
        if (!to.is_string()) t.fail("prefix", str("maps '", from.str(), "' to a non-string; expected { \"from.\" = \"to.\" }"));
        m.prefix.emplace_back(std::string(from.str()), to.value<std::string>().value());
      }
    } else {
      t.fail("prefix", "must be a string (removed from the file's keys) or a table { \"from.\" = \"to.\" }");
    }
  }
  for (const char* k : {"strict", "prefix", "init_format"})
    if (m.init.empty() && t.has(k)) t.fail(k, "applies to starting weights: set init = \"weights.safetensors\" too");
}

}  // namespace

TomlTable inline_model_table(const RunConfig& c) {
  TomlTable t(*c.model.inline_model, c.path, "[model]");
  for (const char* k : {"init", "init_format", "strict", "prefix", "activation_checkpointing"}) t.has(k);
  return t;
}

namespace {

void load_model(RunConfig& c, const TomlTable& t) {
  load_model_init(c, t);
  c.model.activation_checkpointing = t.get_choice("activation_checkpointing", nn::activation_checkpointing_policies(),
                                                  c.model.activation_checkpointing);
  if (t.has("file")) {
    c.model.file = resolve_path(t.get_string("file"), fs::path(c.path).parent_path().string());
    t.finish();
    return;
  }
  TR_CHECK(t.has("layers"), c.path, ": [model] needs either file = \"models/....toml\" or the layers inline");
  c.model.is_inline = true;
  c.model.inline_model = c.source->get("model")->as_table();
}

// The common keys; the dataset's keys and transforms are read by their builders at setup.
void load_data(RunConfig& c, const TomlTable& t) {
  auto& d = c.data;
  t.get_registered<data::DatasetType>("dataset", d.dataset);
  d.dataset = t.get_string("dataset", d.dataset);
  d.batch_size = t.get_int("batch_size", d.batch_size);
  if (d.batch_size <= 0) t.fail("batch_size", "must be positive");
  if (t.has("micro_batch_size")) {
    if (t.has("batch_size"))
      t.fail("micro_batch_size", "and batch_size are two ways to size a micro-step (per rank, or the global batch): "
                                 "give one");
    d.micro_batch_size = t.get_int("micro_batch_size");
    if (d.micro_batch_size <= 0) t.fail("micro_batch_size", "must be positive");
  }
  d.eval_batch_size = t.get_int("eval_batch_size", d.eval_batch_size);
  d.shuffle = t.get_bool("shuffle", d.shuffle);
  d.drop_last = t.get_bool("drop_last", d.drop_last);
  d.workers = t.get_int("workers", d.workers);
  if (t.has("tokenizer")) d.tokenizer = resolve_path(t.get_string("tokenizer"), fs::path(c.path).parent_path().string());
  d.table = t;
}

void load_optimizer(RunConfig& c, TomlTable t) {
  auto& o = c.optimizer;
  t.record_into(o.resolved);
  t.get_registered<optim::OptimizerType>("type", o.type);
  o.type = t.get_string("type", o.type);
  o.hyperparameters = optim::read_hyperparameters(t, o.type, /*with_defaults=*/true);
  if (const toml::node* g = t.node("groups")) {
    if (!g->is_array_of_tables()) t.fail("groups", "must be an array of tables ([[optimizer.groups]])");
    o.groups = g->as_array();
  }
  t.finish();
}

void load_scheduler(RunConfig& c, const TomlTable& top) {
  if (const toml::node* n = c.source->get("scheduler")) {
    if (!n->is_table()) top.fail("scheduler", "must be a table");
    c.scheduler.table = n->as_table();
  }
}

void load_loss(RunConfig& c, const TomlTable& t) {
  t.get_registered<nn::LossType>("type", c.loss.type);
  c.loss.type = t.get_string("type", c.loss.type);
  c.loss.table = t;
}

void load_train(RunConfig& c, const TomlTable& t) {
  auto& tr = c.train;
  tr.epochs = t.get_int("epochs", tr.epochs);
  tr.steps = t.get_int("steps", tr.steps);
  if (tr.epochs <= 0 && tr.steps <= 0) t.fail("epochs", "and steps: one of them must be positive");
  tr.eval_every = t.get_int("eval_every", tr.eval_every);
  tr.eval_batches = t.get_int("eval_batches", tr.eval_batches);
  tr.log_every = t.get_int("log_every", tr.log_every);
  if (tr.log_every <= 0) t.fail("log_every", "must be positive");
  tr.accumulate = t.get_int("accumulate", tr.accumulate);
  if (tr.accumulate <= 0) t.fail("accumulate", "must be a positive number of micro-batches");
  if (t.has("tokens_per_step")) {
    if (t.has("accumulate"))
      t.fail("tokens_per_step", "sets the accumulation count (tokens_per_step / (batch x tokens per sample)); give it "
                                "or accumulate, not both");
    tr.tokens_per_step = t.get_int("tokens_per_step");
    if (tr.tokens_per_step <= 0) t.fail("tokens_per_step", "must be positive");
  }
  tr.nonfinite = t.get_choice("nonfinite", {"stop", "skip", "warn"}, tr.nonfinite);
  tr.ema_decay = t.get_float("ema_decay", tr.ema_decay);
  if (!(tr.ema_decay >= 0 && tr.ema_decay < 1)) t.fail("ema_decay", "must be in [0, 1) (0 turns the EMA of the weights off)");
  if (auto gc = t.get_table("grad_clip")) {
    auto& g = tr.grad_clip;
    g.max_norm = gc->get_float("max_norm", g.max_norm);
    if (g.max_norm < 0) gc->fail("max_norm", "must be >= 0 (0 disables norm clipping)");
    if (const toml::node* n = gc->node("norm_type"); n && n->is_string()) {
      if (gc->get_string("norm_type") != "inf") gc->fail("norm_type", "must be a number p > 0 or \"inf\"");
      g.norm_type = std::numeric_limits<double>::infinity();
    } else {
      g.norm_type = gc->get_float("norm_type", g.norm_type);
      if (!(g.norm_type > 0)) gc->fail("norm_type", "must be a number p > 0 or \"inf\"");
    }
    g.error_if_nonfinite = gc->get_bool("error_if_nonfinite", g.error_if_nonfinite);
    g.value = gc->get_float("value", g.value);
    if (g.value < 0) gc->fail("value", "must be >= 0 (0 disables value clipping)");
    gc->finish();
  }
  t.finish();
}

void load_log(RunConfig& c, const TomlTable& t) {
  c.log.jsonl = t.get_bool("jsonl", c.log.jsonl);
  c.log.progress = t.get_choice("progress", {"auto", "lines", "none"}, c.log.progress);
  c.log.tensorboard = t.get_bool("tensorboard", c.log.tensorboard);
  c.log.histograms_every = t.get_int("histograms_every", c.log.histograms_every);
  if (c.log.histograms_every < 0) t.fail("histograms_every", "must be >= 0 (0: no histograms)");
  if (c.log.histograms_every > 0 && !c.log.tensorboard)
    t.fail("histograms_every", "writes TensorBoard histograms: set [log] tensorboard = true too");
  t.finish();
}

void load_checkpoint(RunConfig& c, const TomlTable& t) {
  auto& k = c.checkpoint;
  k.every = t.get_int("every", k.every);
  if (k.every < 0) t.fail("every", "must be >= 0 steps (0: only at epoch ends and the end)");
  k.every_epoch = t.get_bool("every_epoch", k.every_epoch);
  k.keep_last = t.get_int("keep_last", k.keep_last);
  if (k.keep_last < 0) t.fail("keep_last", "must be >= 0 (0 keeps every checkpoint)");
  k.keep_best = t.get_choice("keep_best", {"", "eval.loss", "eval.accuracy"}, k.keep_best);
  if (k.keep_best == "eval.accuracy" && !Registry<nn::LossType>::get().at(c.loss.type).classification)
    t.fail("keep_best", str("needs an accuracy, and [loss] type = '", c.loss.type, "' is no classification loss"));
  k.save_final = t.get_bool("save_final", k.save_final);
  k.on_error = t.get_choice("on_error", {"stop", "warn"}, k.on_error);
  k.async = t.get_bool("async", k.async);
  t.finish();
}

void load_dist(RunConfig& c, const TomlTable& t) {
  auto& g = c.dist;
  g.backend = t.get_choice("backend", {"auto", "gloo", "nccl"}, g.backend);
  g.bucket_mb = t.get_float("bucket_mb", g.bucket_mb);
  if (!(g.bucket_mb > 0)) t.fail("bucket_mb", "must be positive");
  g.find_unused_parameters = t.get_bool("find_unused_parameters", g.find_unused_parameters);
  g.broadcast_buffers = t.get_bool("broadcast_buffers", g.broadcast_buffers);
  g.shard = t.get_choice("shard", {"none", "optimizer", "gradients"}, g.shard);
  g.timeout_s = t.get_float("timeout_s", g.timeout_s);
  if (!(g.timeout_s > 0)) t.fail("timeout_s", "must be positive");
  g.hang_timeout_s = t.get_float("hang_timeout_s", g.hang_timeout_s);
  if (!(g.hang_timeout_s >= 0)) t.fail("hang_timeout_s", "must be >= 0 (0: no hang watchdog)");
  g.hang_factor = t.get_float("hang_factor", g.hang_factor);
  if (!(g.hang_factor >= 1)) t.fail("hang_factor", "must be >= 1 (a step is a hang past this many median steps)");
  t.finish();
}

void load_amp(RunConfig& c, const TomlTable& t) {
  auto& a = c.amp;
  a.enabled = t.get_bool("enabled", a.enabled);
  a.dtype = t.get_choice("dtype", {"bf16", "fp16"}, a.dtype);
  a.scaler = a.dtype == "fp16";
  if (std::optional<TomlTable> s = t.get_table("scaler")) {
    a.scaler = s->get_bool("enabled", a.scaler);
    a.init_scale = s->get_float("init_scale", a.init_scale);
    if (!(a.init_scale > 0)) s->fail("init_scale", "must be positive");
    a.growth_factor = s->get_float("growth_factor", a.growth_factor);
    if (!(a.growth_factor > 1)) s->fail("growth_factor", "must be > 1");
    a.backoff_factor = s->get_float("backoff_factor", a.backoff_factor);
    if (!(a.backoff_factor > 0 && a.backoff_factor < 1)) s->fail("backoff_factor", "must be in (0, 1)");
    a.growth_interval = s->get_int("growth_interval", a.growth_interval);
    if (a.growth_interval < 1) s->fail("growth_interval", "must be a positive integer");
    s->finish();
  }
  t.finish();
}

RunConfig make_run_config(std::shared_ptr<toml::table> parsed, const std::string& path,
                          const std::vector<std::string>& overrides) {
  for (auto& o : overrides) apply_override(*parsed, o);
  RunConfig c;
  c.path = path;
  c.source = parsed;
  TomlTable top(*parsed, path, "run config");
  for (const char* s : {"run", "model", "data", "optimizer", "scheduler", "loss", "train", "log", "checkpoint", "dist", "amp"})
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

template <typename V>
toml::array array_of(const V& v) {
  toml::array a;
  for (auto& x : v) a.push_back(x);
  return a;
}

// Copies every entry of `from` into `to`.
void merge_into(toml::table& to, const toml::table& from) {
  for (auto&& [k, v] : from) v.visit([&, key = std::string(k.str())](auto&& x) { to.insert_or_assign(key, x); });
}

toml::table data_toml(const DataSection& d) {
  toml::table data{{"dataset", d.dataset}, {"eval_batch_size", d.eval_batch_size},
                   {"shuffle", d.shuffle}, {"drop_last", d.drop_last}, {"workers", d.workers}};
  if (d.micro_batch_size > 0) data.insert("micro_batch_size", d.micro_batch_size);
  else data.insert("batch_size", d.batch_size);
  if (!d.tokenizer.empty()) data.insert("tokenizer", d.tokenizer);
  merge_into(data, d.resolved);
  return data;
}

toml::table train_toml(const TrainSection& t) {
  toml::table r{{"epochs", t.epochs}, {"steps", t.steps}, {"eval_every", t.eval_every},
                {"eval_batches", t.eval_batches}, {"log_every", t.log_every},
                {"ema_decay", t.ema_decay}, {"nonfinite", t.nonfinite}};
  if (t.tokens_per_step > 0) r.insert("tokens_per_step", t.tokens_per_step);
  else r.insert("accumulate", t.accumulate);
  const auto& g = t.grad_clip;
  if (g.max_norm > 0 || g.value > 0) {
    toml::table gc{{"max_norm", g.max_norm}, {"error_if_nonfinite", g.error_if_nonfinite}, {"value", g.value}};
    if (std::isinf(g.norm_type)) gc.insert("norm_type", "inf");
    else gc.insert("norm_type", g.norm_type);
    r.insert("grad_clip", gc);
  }
  return r;
}

toml::table amp_toml(const AmpSection& a) {
  return toml::table{{"enabled", a.enabled}, {"dtype", a.dtype},
                     {"scaler", toml::table{{"enabled", a.scaler}, {"init_scale", a.init_scale},
                                            {"growth_factor", a.growth_factor}, {"backoff_factor", a.backoff_factor},
                                            {"growth_interval", a.growth_interval}}}};
}

}  // namespace

std::string to_toml(const RunConfig& c) {
  toml::table root;
  toml::table run{{"name", c.run.name},       {"out_dir", c.run.out_dir},
                  {"seed", c.run.seed},       {"device", c.run.device},
                  {"threads", c.run.threads}, {"dtype", c.run.dtype}, {"cudnn_benchmark", c.run.cudnn_benchmark},
                  {"deterministic", c.run.deterministic}, {"fused_ops", c.run.fused_ops},
                  {"attention", c.run.attention}};
  if (c.run.allow_tf32) run.insert("allow_tf32", *c.run.allow_tf32);
  root.insert("run", std::move(run));
  if (c.model.is_inline) root.insert("model", *c.model.inline_model);
  else {
    toml::table model{{"file", c.model.file}, {"activation_checkpointing", c.model.activation_checkpointing}};
    if (!c.model.init.empty()) {
      model.insert("init", c.model.init);
      if (c.model.init_format != "torch") model.insert("init_format", c.model.init_format);
      model.insert("strict", c.model.strict);
      toml::table prefix;
      for (const auto& [from, to] : c.model.prefix) prefix.insert(from, to);
      if (!prefix.empty()) model.insert("prefix", std::move(prefix));
    }
    root.insert("model", std::move(model));
  }
  root.insert("data", data_toml(c.data));
  toml::table optimizer = c.optimizer.resolved;
  if (c.optimizer.groups) optimizer.insert("groups", *c.optimizer.groups);
  root.insert("optimizer", std::move(optimizer));
  if (c.scheduler.enabled()) root.insert("scheduler", *c.scheduler.table);
  if (!c.loss.resolved.empty()) root.insert("loss", c.loss.resolved);
  root.insert("train", train_toml(c.train));
  root.insert("log", toml::table{{"jsonl", c.log.jsonl}, {"progress", c.log.progress},
                                 {"tensorboard", c.log.tensorboard}, {"histograms_every", c.log.histograms_every}});
  const auto& k = c.checkpoint;
  root.insert("checkpoint", toml::table{{"every", k.every}, {"every_epoch", k.every_epoch}, {"keep_last", k.keep_last},
                                        {"keep_best", k.keep_best}, {"save_final", k.save_final},
                                        {"on_error", k.on_error}, {"async", k.async}});
  const auto& ds = c.dist;
  root.insert("dist", toml::table{{"backend", ds.backend}, {"bucket_mb", ds.bucket_mb},
                                  {"find_unused_parameters", ds.find_unused_parameters},
                                  {"broadcast_buffers", ds.broadcast_buffers}, {"shard", ds.shard},
                                  {"timeout_s", ds.timeout_s},
                                  {"hang_timeout_s", ds.hang_timeout_s}, {"hang_factor", ds.hang_factor}});
  root.insert("amp", amp_toml(c.amp));
  std::ostringstream os;
  os << "# resolved config of run '" << c.run.name << "' (from " << c.path << ")\n" << root << "\n";
  return os.str();
}

}  // namespace tr::config
