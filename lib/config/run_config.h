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
#include "optim/optimizer.h"
#include "toml/toml_table.h"

namespace tr::config {

struct RunSection {
  std::string name;            // default: the config file's stem
  std::string out_dir = "runs";
  int64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  int64_t threads = 0;          // 0: OMP_NUM_THREADS or all cores
  std::string dtype = "float32";  // the parameters' and floating inputs' dtype: float32 | float64
  // CUDA libraries (torch.backends): cuDNN's algorithm search, deterministic algorithms only, and
  // TF32 for f32 convolutions and matrix products (unset: torch's defaults, convolutions yes and
  // matrix products no)
  bool cudnn_benchmark = false;
  bool deterministic = false;
  std::optional<bool> allow_tf32;
  bool fused_ops = true;  // fused kernels (false: their composite op chains, same math)
  // attention's path (ops/backends.h): "auto" (the path measured fastest on the device: the fused
  // op on the CPU and on CUDA), "fused" or "composite"; fused_ops = false runs the composite chain
  // whatever this says
  std::string attention = "auto";
};

struct ModelSection {
  std::string file;  // a model file, relative to the run config's directory or the working directory
  // or the layers inline: input, input_dtype, layers (a table of RunConfig::source)
  const toml::table* inline_model = nullptr;
  bool is_inline = false;
  // Starting weights: a safetensors file (a torch state_dict saved with safetensors.torch.save_file,
  // or an export), loaded after the model is built and initialised; resolved like `file`.
  std::string init;
  // What `init` is: "torch" (a state_dict by its own names) or "gpt2_hf" (Hugging Face's
  // GPT2LMHeadModel, a save_pretrained directory or its model.safetensors, mapped onto a GPT-2 model
  // file's names by train/gpt2_hf_format.h: Conv1D weights transposed, the tied head kept).
  std::string init_format = "torch";
  bool strict = true;  // false: missing and unexpected keys are warnings that list them
  // Renames of the file's key prefixes before loading, in order, the first that applies: from -> to
  // (prefix = "module." strips DDP's prefix; prefix = { "backbone." = "features." } renames).
  std::vector<std::pair<std::string, std::string>> prefix;
  // "none" or "blocks": activation checkpointing of every transformer_block
  // (nn/activation_checkpoint.h); bit-identical results, less memory, one more forward per block.
  std::string activation_checkpointing = "none";
};

// The common keys of [data]; the rest of the table belongs to the dataset's builder
// (data/dataset_registry.h) and to `transforms` (data/transforms.h), read at setup.
struct DataSection {
  std::string dataset = "idx";  // a registered dataset
  int64_t batch_size = 64;       // the global batch of a micro-step, sliced across ranks
  // > 0 (instead of batch_size): samples per rank per micro-step, llm.c's -b; the global batch
  // is then micro_batch_size x ranks (train/run_setup.h resolves it)
  int64_t micro_batch_size = 0;
  int64_t eval_batch_size = 0;  // 0: batch_size
  bool shuffle = true;
  bool drop_last = false;
  int64_t workers = 0;
  // The GPT-2 BPE (a directory of vocab.json + merges.txt, resolved like [model] file) that made
  // the run's token files: `trainer sample` encodes prompts and decodes with it. Optional; no
  // dataset reads it.
  std::string tokenizer;
  std::optional<TomlTable> table;  // [data], the keys above read (finish() comes after the builders)
  toml::table resolved;            // what the dataset and transform builders read, defaults included
};

// [optimizer]: a registered optimizer (optim/optimizer_registry.h) and its hyperparameters.
struct OptimizerSection {
  std::string type = "sgd";
  optim::Options hyperparameters;  // every one of the type's, defaults included (Options keys)
  // [[optimizer.groups]]: rules that carve parameter groups out of the model (optim/param_groups.h),
  // kept as TOML (in RunConfig::source) and checked when the optimizer is built, before the first step.
  const toml::array* groups = nullptr;
  toml::table resolved;  // type and hyperparameters as TOML writes them, defaults included
};

// [loss]: a registered loss (nn/loss.h); its keys are read by the loss's builder at setup.
struct LossSection {
  std::string type = "cross_entropy";
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
  double max_norm = 0;     // > 0: clip_grad_norm to this total norm
  double norm_type = 2.0;  // any p > 0, or inf
  bool error_if_nonfinite = false;
  double value = 0;        // > 0: clip_grad_value to [-value, value] (before the norm clipping)
};

struct TrainSection {
  int64_t epochs = 1;
  int64_t steps = 0;         // > 0: stop after this many optimizer steps (overrides epochs)
  int64_t eval_every = 0;    // > 0: evaluate every N steps; always at each epoch end
  int64_t eval_batches = 0;  // > 0: evaluate on the first N batches only
  int64_t log_every = 50;
  int64_t accumulate = 1;  // micro-batches of batch_size per optimizer step
  // > 0 (instead of accumulate): tokens per optimizer step, llm.c's -d (total_batch_size);
  // accumulate = tokens_per_step / (global batch x tokens per sample), which must be whole
  int64_t tokens_per_step = 0;
  GradClip grad_clip;
  double ema_decay = 0;    // > 0: also keep an EMA of the weights (optim/averaged_model.h), evaluated beside the model
  // A non-finite loss or gradient before the optimizer step: "stop" (re-run the step to name the
  // op and layer that made it, save the batch's indices, exit with an error), "skip" (the step is
  // not applied; counted in the metrics), "warn" (applied, a warning)
  std::string nonfinite = "stop";
};

struct LogSection {
  bool jsonl = true;
  std::string progress = "auto";  // auto (a live line on a terminal) | lines | none
  bool tensorboard = false;       // runs/<name>/events.out.tfevents.*: the metrics as scalars, the config as text
  int64_t histograms_every = 0;   // > 0 (with tensorboard): weight and gradient histograms every N steps
};

// Checkpoints: runs/<name>/checkpoints/step_<N>/ (model.safetensors, optimizer.safetensors, state.json).
struct CheckpointSection {
  int64_t every = 0;         // > 0: every N optimizer steps
  bool every_epoch = true;   // at the end of every epoch (after its eval)
  int64_t keep_last = 3;     // newest N kept (0: all)
  std::string keep_best;     // "" | "eval.loss" (lowest kept) | "eval.accuracy" (highest kept), besides keep_last
  bool save_final = true;    // also a checkpoint at the end of the run, and the weights alone in checkpoints/final/
  std::string on_error = "stop";  // a checkpoint that cannot be written: "stop" (exit status 4) | "warn" (train on)
  // true: the step copies the state (device tensors to pinned host memory) and a background thread
  // writes the files; the next checkpoint, a stop and the end of the run wait for that write
  bool async = true;
};

// Data parallelism (`trainer run --nproc N`): how the ranks talk and how DDP reduces gradients.
struct DistSection {
  std::string backend = "auto";  // auto (nccl on CUDA, else gloo) | gloo | nccl
  double bucket_mb = 25.0;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  // ZeRO (distributed/ddp.h): "none" | "optimizer" (ZeRO-1: the optimizer state sharded over the
  // ranks) | "gradients" (ZeRO-2: the gradients too)
  std::string shard = "none";
  double timeout_s = 300;  // a collective or the rendezvous taking longer is an error naming the rank
  // The hang watchdog (distributed/hang_watchdog.h): a step (or eval, checkpoint) running longer than
  // hang_timeout_s and than hang_factor x the median step stops every rank with a report; 0: off.
  double hang_timeout_s = 300;
  double hang_factor = 10;
};

// Automatic mixed precision: the forward and loss under autocast, backward through a GradScaler.
struct AmpSection {
  bool enabled = false;
  std::string dtype = "bf16";  // bf16 | fp16
  // [amp.scaler]: on by default for fp16 (whose range needs it), off for bf16
  bool scaler = false;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

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
RunConfig parse_run_config(std::string_view text, const std::string& path, const std::vector<std::string>& overrides = {});
// Applies one "a.b.c=value" override to a table (creating tables on the way).
void apply_override(toml::table& t, const std::string& assignment);
// The resolved config (every key, defaults included) as TOML; complete once the run is set up.
std::string to_toml(const RunConfig& c);
// An inline [model] as the model builder reads it: the run config's own keys of the section
// (init, strict, prefix) already read, so that the builder's unknown-key check passes them.
TomlTable inline_model_table(const RunConfig& c);

}  // namespace tr::config
