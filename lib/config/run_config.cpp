#include "config/run_config.h"
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include "core/error.h"
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
  // the value as TOML (3, 0.1, true, "x", [1, 2]); anything that does not parse is a string
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    parsed.insert("v", value);
  }
  t->insert_or_assign(parts.back(), *parsed.get("v"));
}

namespace {

std::string resolve_path(const std::string& p, const std::string& config_dir) {
  if (p.empty() || fs::path(p).is_absolute() || fs::exists(p)) return p;
  fs::path alt = fs::path(config_dir) / p;
  return fs::exists(alt) ? alt.string() : p;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  auto parsed = std::make_shared<toml::table>(parse_toml_file(path));
  for (auto& o : overrides) apply_override(*parsed, o);
  RunConfig c;
  c.path = path;
  c.source = parsed;
  const toml::table& root = *parsed;
  std::string dir = fs::path(path).parent_path().string();
  TomlTable top(root, path, "run config");
  const std::vector<std::string> sections = {"run", "model", "data", "optimizer", "scheduler", "train", "log", "checkpoint", "dist", "amp"};
  for (auto& s : sections) top.has(s);
  top.finish();

  auto section = [&](const char* name) {
    const toml::node* n = root.get(name);
    static const toml::table empty;
    if (n && !n->is_table()) top.fail(name, "must be a table");
    return TomlTable(n ? *n->as_table() : empty, path, str("[", name, "]"));
  };

  {
    TomlTable t = section("run");
    c.run.name = t.get_string("name", fs::path(path).stem().string());
    c.run.out_dir = t.get_string("out_dir", c.run.out_dir);
    c.run.seed = t.get_int("seed", c.run.seed);
    c.run.device = t.get_string("device", c.run.device);
    if (c.run.device != "auto" && c.run.device != "cpu" && c.run.device.rfind("cuda", 0) != 0)
      t.fail("device", str("is '", c.run.device, "', expected auto, cpu, cuda or cuda:N"));
    c.run.threads = t.get_int("threads", c.run.threads);
    TR_CHECK(!c.run.name.empty() && c.run.name.find('/') == std::string::npos, path, ": [run] name '", c.run.name,
             "' must be a non-empty name without '/'");
    t.finish();
  }
  {
    TomlTable t = section("model");
    if (t.has("file")) {
      c.model.file = resolve_path(t.get_string("file"), dir);
      t.finish();
    } else {
      TR_CHECK(t.has("layers"), path, ": [model] needs either file = \"models/....toml\" or the layers inline");
      c.model.is_inline = true;
      c.model.inline_model = root.get("model")->as_table();
    }
  }
  {
    TomlTable t = section("data");
    auto& d = c.data;
    d.dataset = t.get_choice("dataset", {"idx", "text", "synthetic"}, d.dataset);
    d.batch_size = t.get_int("batch_size", d.batch_size);
    if (d.batch_size <= 0) t.fail("batch_size", "must be positive");
    d.eval_batch_size = t.get_int("eval_batch_size", d.eval_batch_size);
    d.shuffle = t.get_bool("shuffle", d.shuffle);
    d.drop_last = t.get_bool("drop_last", d.drop_last);
    d.workers = t.get_int("workers", d.workers);
    const std::string fm = "/usr/share/datasets/fashion-mnist/";
    d.train_images = resolve_path(t.get_string("train_images", fm + "train-images-idx3-ubyte.gz"), dir);
    d.train_labels = resolve_path(t.get_string("train_labels", fm + "train-labels-idx1-ubyte.gz"), dir);
    d.test_images = resolve_path(t.get_string("test_images", fm + "t10k-images-idx3-ubyte.gz"), dir);
    d.test_labels = resolve_path(t.get_string("test_labels", fm + "t10k-labels-idx1-ubyte.gz"), dir);
    if (t.has("normalize")) {
      d.normalize = t.get_floats("normalize");
      if (d.normalize.size() != 2 || d.normalize[1] <= 0) t.fail("normalize", "must be [mean, std] with std > 0");
    }
    if (t.has("transforms")) {
      for (TomlTable& e : t.get_tables("transforms")) {
        TransformSpec ts;
        if (!e.has("type")) e.fail("type", "is required: random_crop or random_horizontal_flip");
        ts.type = e.get_choice("type", {"random_crop", "random_horizontal_flip"}, "");
        if (ts.type == "random_crop") {
          if (e.has("size")) ts.size = e.get_pair("size", {});
          ts.padding = e.get_int("padding", 0);
          if (ts.padding < 0) e.fail("padding", "must be >= 0");
          ts.fill = e.get_float("fill", 0.0);
          if (!ts.size.empty() && (ts.size[0] < 1 || ts.size[1] < 1)) e.fail("size", "must be positive");
        } else {
          ts.p = e.get_float("p", 0.5);
          if (!(ts.p >= 0 && ts.p <= 1)) e.fail("p", "must be in [0, 1]");
        }
        e.finish();
        d.transforms.push_back(ts);
      }
    }
    if (t.has("paths")) d.paths = t.get_strings("paths");
    d.block_size = t.get_int("block_size", d.block_size);
    d.eval_fraction = t.get_float("eval_fraction", d.eval_fraction);
    if (!(d.eval_fraction > 0 && d.eval_fraction < 1)) t.fail("eval_fraction", "must be in (0, 1)");
    d.num_classes = t.get_int("num_classes", d.num_classes);
    d.train_size = t.get_int("train_size", d.train_size);
    d.eval_size = t.get_int("eval_size", d.eval_size);
    t.finish();
  }
  {
    TomlTable t = section("optimizer");
    auto& o = c.optimizer;
    o.type = t.get_choice("type", {"sgd", "adam", "adamw"}, o.type);
    if (o.type != "sgd") o.lr = 1e-3;
    if (o.type == "adamw") o.weight_decay = 0.01;
    o.lr = t.get_float("lr", o.lr);
    if (o.lr < 0) t.fail("lr", "must be >= 0");
    o.momentum = t.get_float("momentum", o.momentum);
    o.dampening = t.get_float("dampening", o.dampening);
    o.weight_decay = t.get_float("weight_decay", o.weight_decay);
    o.nesterov = t.get_bool("nesterov", o.nesterov);
    if (t.has("betas")) {
      o.betas = t.get_floats("betas");
      if (o.betas.size() != 2) t.fail("betas", "must be [beta1, beta2]");
    }
    o.eps = t.get_float("eps", o.eps);
    o.amsgrad = t.get_bool("amsgrad", o.amsgrad);
    o.maximize = t.get_bool("maximize", o.maximize);
    if (o.type == "sgd" && (t.has("betas") || t.has("amsgrad")))
      t.fail(t.has("betas") ? "betas" : "amsgrad", "applies to adam and adamw, not sgd");
    if (const toml::node* g = t.node("groups")) {
      if (!g->is_array_of_tables()) t.fail("groups", "must be an array of tables ([[optimizer.groups]])");
      o.groups = g->as_array();
    }
    t.finish();
  }
  {
    TomlTable t = section("train");
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
  if (const toml::node* n = root.get("scheduler")) {
    if (!n->is_table()) top.fail("scheduler", "must be a table");
    c.scheduler.table = n->as_table();
  }
  {
    TomlTable t = section("log");
    c.log.jsonl = t.get_bool("jsonl", c.log.jsonl);
    c.log.progress = t.get_choice("progress", {"auto", "lines", "none"}, c.log.progress);
    t.finish();
  }
  {
    TomlTable t = section("checkpoint");
    auto& k = c.checkpoint;
    k.every = t.get_int("every", k.every);
    if (k.every < 0) t.fail("every", "must be >= 0 steps (0: only at epoch ends and the end)");
    k.every_epoch = t.get_bool("every_epoch", k.every_epoch);
    k.keep_last = t.get_int("keep_last", k.keep_last);
    if (k.keep_last < 0) t.fail("keep_last", "must be >= 0 (0 keeps every checkpoint)");
    k.keep_best = t.get_choice("keep_best", {"", "eval.loss", "eval.accuracy"}, k.keep_best);
    k.save_final = t.get_bool("save_final", k.save_final);
    t.finish();
  }
  {
    TomlTable t = section("dist");
    auto& g = c.dist;
    g.backend = t.get_choice("backend", {"auto", "gloo", "nccl"}, g.backend);
    g.bucket_mb = t.get_float("bucket_mb", g.bucket_mb);
    if (!(g.bucket_mb > 0)) t.fail("bucket_mb", "must be positive");
    g.find_unused_parameters = t.get_bool("find_unused_parameters", g.find_unused_parameters);
    g.broadcast_buffers = t.get_bool("broadcast_buffers", g.broadcast_buffers);
    g.timeout_s = t.get_float("timeout_s", g.timeout_s);
    if (!(g.timeout_s > 0)) t.fail("timeout_s", "must be positive");
    t.finish();
  }
  {
    TomlTable t = section("amp");
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
  return c;
}

std::string to_toml(const RunConfig& c) {
  auto arr = [](const auto& v) {
    toml::array a;
    for (auto& x : v) a.push_back(x);
    return a;
  };
  toml::table root;
  root.insert("run", toml::table{{"name", c.run.name}, {"out_dir", c.run.out_dir}, {"seed", c.run.seed},
                                 {"device", c.run.device}, {"threads", c.run.threads}});
  if (c.model.is_inline) root.insert("model", *c.model.inline_model);
  else root.insert("model", toml::table{{"file", c.model.file}});
  const auto& d = c.data;
  toml::table data{{"dataset", d.dataset}, {"batch_size", d.batch_size}, {"eval_batch_size", d.eval_batch_size},
                   {"shuffle", d.shuffle}, {"drop_last", d.drop_last}, {"workers", d.workers}};
  if (d.dataset == "idx") {
    data.insert("train_images", d.train_images);
    data.insert("train_labels", d.train_labels);
    data.insert("test_images", d.test_images);
    data.insert("test_labels", d.test_labels);
    if (!d.normalize.empty()) data.insert("normalize", arr(d.normalize));
  } else if (d.dataset == "text") {
    data.insert("paths", arr(d.paths));
    data.insert("block_size", d.block_size);
    data.insert("eval_fraction", d.eval_fraction);
  } else {
    data.insert("num_classes", d.num_classes);
    data.insert("train_size", d.train_size);
    data.insert("eval_size", d.eval_size);
  }
  if (!d.transforms.empty()) {
    toml::array ts;
    for (const auto& x : d.transforms) {
      toml::table e{{"type", x.type}};
      if (x.type == "random_crop") {
        if (!x.size.empty()) e.insert("size", arr(x.size));
        e.insert("padding", x.padding);
        e.insert("fill", x.fill);
      } else {
        e.insert("p", x.p);
      }
      ts.push_back(std::move(e));
    }
    data.insert("transforms", std::move(ts));
  }
  root.insert("data", data);
  const auto& o = c.optimizer;
  root.insert("optimizer", toml::table{{"type", o.type}, {"lr", o.lr}, {"momentum", o.momentum},
                                       {"dampening", o.dampening}, {"weight_decay", o.weight_decay},
                                       {"nesterov", o.nesterov}, {"betas", arr(o.betas)}, {"eps", o.eps},
                                       {"amsgrad", o.amsgrad}, {"maximize", o.maximize}});
  if (o.groups) root.get("optimizer")->as_table()->insert("groups", *o.groups);
  if (c.scheduler.enabled()) root.insert("scheduler", *c.scheduler.table);
  const auto& t = c.train;
  root.insert("train", toml::table{{"epochs", t.epochs}, {"steps", t.steps}, {"eval_every", t.eval_every},
                                   {"eval_batches", t.eval_batches}, {"log_every", t.log_every},
                                   {"accumulate", t.accumulate}});
  const auto& g = t.grad_clip;
  if (g.max_norm > 0 || g.value > 0) {
    toml::table gc{{"max_norm", g.max_norm}, {"error_if_nonfinite", g.error_if_nonfinite}, {"value", g.value}};
    if (std::isinf(g.norm_type)) gc.insert("norm_type", "inf");
    else gc.insert("norm_type", g.norm_type);
    root.get("train")->as_table()->insert("grad_clip", gc);
  }
  root.insert("log", toml::table{{"jsonl", c.log.jsonl}, {"progress", c.log.progress}});
  const auto& k = c.checkpoint;
  root.insert("checkpoint", toml::table{{"every", k.every}, {"every_epoch", k.every_epoch}, {"keep_last", k.keep_last},
                                        {"keep_best", k.keep_best}, {"save_final", k.save_final}});
  const auto& ds = c.dist;
  root.insert("dist", toml::table{{"backend", ds.backend}, {"bucket_mb", ds.bucket_mb},
                                  {"find_unused_parameters", ds.find_unused_parameters},
                                  {"broadcast_buffers", ds.broadcast_buffers}, {"timeout_s", ds.timeout_s}});
  const auto& a = c.amp;
  root.insert("amp", toml::table{{"enabled", a.enabled}, {"dtype", a.dtype},
                                 {"scaler", toml::table{{"enabled", a.scaler}, {"init_scale", a.init_scale},
                                                        {"growth_factor", a.growth_factor},
                                                        {"backoff_factor", a.backoff_factor},
                                                        {"growth_interval", a.growth_interval}}}});
  std::ostringstream os;
  os << "# resolved config of run '" << c.run.name << "' (from " << c.path << ")\n" << root << "\n";
  return os.str();
}

}  // namespace tr::config
