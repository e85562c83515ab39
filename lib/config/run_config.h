// The run config: TOML -> typed, validated structs with defaults, `--set section.key=value`
// overrides, and the fully resolved config written back as TOML. Unknown keys are errors with
// file:line:column and the nearest valid key; wrong types name the key and the expected type.
// The kinds a config names (optimizer, dataset, transforms, loss; the scheduler and layers too)
// are looked up in their registries, whose builders read their own keys: the optimizer's when the
// config is loaded, the dataset's, transforms' and loss's when the run is set up
// (train/run_setup.h), each recording what it read so that to_toml writes the resolved config.
#pragma once
#include <toml++/toml.h>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "config/key_types.h"
#include "optim/optimizer.h"
#include "toml/toml_table.h"

namespace tr::config {

// Each section's fixed keys are members made from run_config_keys.def, the one declaration of a
// key's name, type, default, allowed values and doc; the members written out here are the other
// things the parser keeps (tables for the builders, what they resolved).
#define TR_CONFIG_MEMBER(member, Type, dflt, ...) \
  keys::Type::value_type member = keys::initial<keys::Type::value_type>(dflt);

struct RunSection {
#define TR_RUN_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
};

struct ModelSection {
#define TR_MODEL_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
  // or the layers inline: input, input_dtype, layers (a table of RunConfig::source)
  const toml::table* inline_model = nullptr;
  bool is_inline = false;
};

// The common keys of [data]; the rest of the table belongs to the dataset's builder
// (data/dataset_registry.h) and to `transforms` (data/transforms.h), read at setup.
struct DataSection {
#define TR_DATA_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
  std::optional<TomlTable> table;  // [data], the keys above read (finish() comes after the builders)
  toml::table resolved;            // what the dataset and transform builders read, defaults included
};

// [optimizer]: a registered optimizer (optim/optimizer_registry.h) and its hyperparameters.
struct OptimizerSection {
#define TR_OPTIMIZER_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
  optim::Options hyperparameters;  // every one of the type's, defaults included (Options keys)
  toml::table resolved;            // type and hyperparameters as TOML writes them, defaults included
};

// [loss]: a registered loss (nn/loss.h); its keys are read by the loss's builder at setup.
struct LossSection {
#define TR_LOSS_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
  std::optional<TomlTable> table;
  toml::table resolved;  // what the builder read, defaults included
};

struct SchedulerSection {
  // [scheduler] as written (optim/scheduler_registry.h builds and checks it against the optimizer's groups);
  // empty: a constant learning rate.
  const toml::table* table = nullptr;  // in RunConfig::source
  bool enabled() const { return table && !table->empty(); }
};

struct GradClip {
#define TR_GRAD_CLIP_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
};

struct TrainSection {
#define TR_TRAIN_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
  GradClip grad_clip;
};

struct LogSection {
#define TR_LOG_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
};

// Checkpoints: runs/<name>/checkpoints/step_<N>/ (model.safetensors, optimizer.safetensors, state.json).
struct CheckpointSection {
#define TR_CHECKPOINT_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
};

// Data parallelism (`trainer run --nproc N`): how the ranks talk and how DDP reduces gradients.
struct DistSection {
#define TR_DIST_KEY TR_CONFIG_MEMBER
#include "config/run_config_keys.def"
};

// Automatic mixed precision: the forward and loss under autocast, backward through a GradScaler;
// [amp.scaler]'s keys are members here too.
struct AmpSection {
#define TR_AMP_KEY TR_CONFIG_MEMBER
#define TR_AMP_SCALER_KEY(member, key, ...) TR_CONFIG_MEMBER(member, __VA_ARGS__)
#include "config/run_config_keys.def"
};

#undef TR_CONFIG_MEMBER

struct RunConfig {
  std::string path;  // the config file
  // The parsed file after overrides. Sections checked later (inline model, groups, scheduler)
  // point into it: toml++ drops source positions when a node is copied, and errors need them.
  std::shared_ptr<const toml::table> source;
  RunSection run;
  ModelSection model;
  DataSection data;
  OptimizerSection optimizer;
  SchedulerSection scheduler;
  LossSection loss;
  TrainSection train;
  LogSection log;
  CheckpointSection checkpoint;
  DistSection dist;
  AmpSection amp;

  std::string run_dir() const { return run.out_dir + "/" + run.name; }
};

// Loads `path`, applies overrides ("section.key=value", value parsed as TOML, else a string),
// validates and fills defaults (the dataset's, transforms' and loss's keys: at setup).
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from the text of a config file; `path` names it in errors and anchors its relative paths.
RunConfig parse_run_config(std::string_view text, const std::string& path,
                           const std::vector<std::string>& overrides = {});
// Applies one "a.b.c=value" override to a table (creating tables on the way).
void apply_override(toml::table& t, const std::string& assignment);
// The resolved config (every key, defaults included) as TOML; complete once the run is set up.
std::string to_toml(const RunConfig& c);
// One row per fixed key of run_config_keys.def, in its order: what `trainer list keys` prints and
// docs/config.md's key tables show (key_docs.cpp).
struct KeyDoc {
  std::string table;  // "train", "train.grad_clip"
  std::string key;
  std::string type;
  std::string default_value;  // as TOML writes it, or what the parser derives it from
  std::string allowed;        // a fixed set, a bound, or "" for any value of the type
  std::string doc;
};
const std::vector<KeyDoc>& key_docs();
// key_docs() as `trainer list`'s entries: "train.epochs" -> "integer = 1: passes over ...".
std::vector<std::pair<std::string, std::string>> key_list_entries();
// The rows of the tables in `section` ("train", with train.grad_clip's rows as grad_clip.*) as a
// Markdown table, docs/config.md's between its <!-- keys: section --> markers.
std::string key_table_markdown(const std::string& section);
// An inline [model] as the model builder reads it: the run config's own keys of the section
// (init, strict, prefix) already read, so that the builder's unknown-key check passes them.
TomlTable inline_model_table(const RunConfig& c);

}  // namespace tr::config
