// Run setup: every part of a training run built from its config, in dependency order — threads
// and seed, device, model, datasets (they need the model's input shape), DDP, the EMA copy, param
// groups and optimizer, GradScaler, training loader (with transforms), LR scheduler, loss. Every config error
// surfaces here, before the first step. The builders of registered kinds record the keys they
// read in `cfg`, so config::to_toml(cfg) is the fully resolved config afterwards. The Trainer
// (train/trainer.h) runs the loop over these parts.
#pragma once
#include <cstdint>
#include <memory>
#include "amp/grad_scaler.h"
#include "config/run_config.h"
#include "data/dataloader.h"
#include "data/dataset_registry.h"
#include "distributed/ddp.h"
#include "distributed/env.h"
#include "distributed/hang_watchdog.h"
#include "distributed/process_group.h"
#include "distributed/sharded_optimizer.h"
#include "distributed/tcp_store.h"
#include "nn/model_file.h"
#include "optim/averaged_model.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/run_loss.h"

namespace tr::train {

struct Run {
  // `world_size` > 0 sizes [data] micro_batch_size and [train] tokens_per_step for that many
  // ranks (trainer plan --nproc) instead of the process group's.
  explicit Run(config::RunConfig cfg, int world_size = 0);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  config::RunConfig cfg;
  distributed::DistEnv env;
  Device device;
  nn::Model model;
  data::DatasetSplits data;
  // data parallel (env.active()): rank 0 of hand-started ranks hosts the store; the process group; DDP
  std::unique_ptr<distributed::TCPStoreServer> store_server;
  std::unique_ptr<distributed::Store> store;
  std::unique_ptr<distributed::ProcessGroup> pg;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
  std::unique_ptr<distributed::HangWatchdog> watchdog;  // [dist] hang_timeout_s > 0 with several ranks
  std::unique_ptr<optim::Optimizer> optimizer;
  // [dist] shard (ZeRO): the optimizer's groups hold this rank's shard views; null otherwise
  std::unique_ptr<distributed::ShardedOptimizer> sharded_optimizer;
  amp::GradScaler scaler{amp::GradScalerOptions{.enabled = false}};
  std::unique_ptr<data::DataLoader> loader;  // the training loader: batch_size samples a micro-batch
  int64_t steps_per_epoch = 0, total_steps = 0;
  std::unique_ptr<optim::LRScheduler> scheduler;  // null without [scheduler]
  std::unique_ptr<optim::AveragedModel> ema;      // [train] ema_decay > 0: the EMA of the weights
  RunLoss loss;

  int64_t epochs() const { return (total_steps + steps_per_epoch - 1) / steps_per_epoch; }
  DType amp_dtype() const { return cfg.amp.dtype == "fp16" ? DType::F16 : DType::BF16; }  // [amp] dtype
  DType dtype() const { return cfg.run.dtype == "float64" ? DType::F64 : DType::F32; }    // [run] dtype
  // A batch's tensor on the run's device, floating values in the run's dtype.
  Tensor to_run(const Tensor& t) const {
    Tensor d = t.to(device);
    return d.is_floating_point() && d.dtype() != dtype() ? d.to(dtype()) : d;
  }
  bool is_main() const { return env.rank == 0; }  // rank 0 (or the only process) writes the run directory
};

// The parts of a run that commands without a training loop (sample, export) use too.

// The EMA weights' file in a checkpoint directory ([train] ema_decay > 0), beside model.safetensors
// and with its names: `trainer export --ema` and `trainer eval --ema` read it.
inline constexpr const char* kEmaFile = "ema.safetensors";

// [run] device for this process ("auto": cuda when a GPU is visible; a rank of several on a node
// takes cuda:LOCAL_RANK). Errors name the config.
Device pick_device(const std::string& spec, const distributed::DistEnv& env, const std::string& path);
// The run's model: its model file or inline [model], [model] activation_checkpointing applied,
// weights as the model file initialises them.
nn::Model build_model(const config::RunConfig& cfg);
// The weights file of `checkpoint`: a checkpoint directory's model.safetensors (ema.safetensors with
// `ema`), or the .safetensors file itself. Errors say which is missing.
std::string weights_file(const std::string& checkpoint, bool ema = false);
// Loads a weights file into `net` strictly (a tied tensor under either name); errors name the file
// and `what` (the model).
void load_weights(nn::Module& net, const std::string& file, const std::string& what);

}  // namespace tr::train
