// Resuming a run (--resume): the checkpoint found, checked against the run as configured now, and
// restored into its parts, so that the run continues bit for bit.
#include <cstdio>
#include <filesystem>
#include "config/config_diff.h"
#include "config/run_config.h"
#include "core/rng.h"
#include "data/data_state.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "toml/toml_table.h"
#include "train/checkpointer.h"

namespace tr::train {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<CheckpointState> Checkpointer::resume(const std::string& spec) {
  const std::optional<std::string> dir = resume_dir(spec);
  if (!dir) return std::nullopt;
  return restore(*dir);
}

std::optional<std::string> Checkpointer::resume_dir(const std::string& spec) const {
  if (spec.empty()) return std::nullopt;
  if (spec != "auto") {
    io::load_checkpoint_state(spec);  // an explicit checkpoint must be valid: no silent fallback
    return spec;
  }
  if (!fs::exists(root())) return std::nullopt;
  std::vector<std::string> warnings;
  auto dir = io::newest_valid_checkpoint(root(), &warnings);
  for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return dir;
}

CheckpointState Checkpointer::restore(const std::string& dir) {
  const CheckpointState state =
      CheckpointState::from_json(io::load_checkpoint_state(dir), dir + "/" + io::kCheckpointStateFile);
  check_config(dir, state);
  restore_model_and_optimizer(dir, state);
  restore_ema_and_scaler(dir, state);
  default_generator().set_state(state.rng);
  check_data(dir, state);
  if (state.best) {
    best_metric_ = state.best->value;
    best_checkpoint_ = state.best->checkpoint;
  }
  return state;
}

void Checkpointer::check_config(const std::string& dir, const CheckpointState& state) {
  // anything but cadence and length must be as saved
  toml::table saved = parse_toml_text(state.config, dir + "/" + io::kCheckpointStateFile + " (config)");
  toml::table now = toml::parse(config::to_toml(run_.cfg));
  std::string refused, accepted;
  for (auto& c : config::diff_configs(saved, now, run_.cfg.source.get()))
    (c.harmless ? accepted : refused) += "\n  " + c.str();
  TR_CHECK(refused.empty(), "cannot resume from ", dir,
           ": the config differs from the checkpoint's in keys that change the run:", refused,
           accepted.empty() ? "" : "\n(also changed, harmless:" + accepted + ")");
  if (!accepted.empty()) std::fprintf(stderr, "resuming with changed settings:%s\n", accepted.c_str());
}

void Checkpointer::restore_model_and_optimizer(const std::string& dir, const CheckpointState& state) {
  auto tensors = io::load_safetensors(dir + "/model.safetensors");
  nn::StateDict sd;
  for (auto& [n, t] : tensors) sd.emplace_back(n, t);
  run_.model.net->load_state_dict(sd, true);
  // the optimizer, then the scheduler (torch's order: the scheduler's construction set the lrs already)
  TR_CHECK(state.optimizer_type == run_.optimizer->type_name(), "cannot resume from ", dir, ": it holds ",
           state.optimizer_type, " state, the config builds ", run_.optimizer->type_name());
  optim::OptimizerState os;
  os.param_groups = state.param_groups;
  os.step_count = state.optimizer_step_count;
  for (auto& [n, t] : io::load_safetensors(dir + "/optimizer.safetensors")) os.tensors[n] = t;
  // (a sharded run keeps its pieces of the full state: any checkpoint resumes with any world size and shard)
  if (run_.sharded_optimizer)
    run_.sharded_optimizer->load_state_dict(os);
  else
    optim::load_state_dict(*run_.optimizer, os);
  if (run_.scheduler) {
    TR_CHECK(!state.scheduler.is_null(), "cannot resume from ", dir, ": it has no scheduler state");
    run_.scheduler->load_state_dict(state.scheduler);
  }
}

void Checkpointer::restore_ema_and_scaler(const std::string& dir, const CheckpointState& state) {
  if (run_.ema) {  // (the config check has refused a checkpoint of a run without EMA)
    TR_CHECK(state.ema && fs::exists(dir + "/" + kEmaFile), "cannot resume from ", dir, ": it holds no EMA weights (",
             kEmaFile, ")");
    nn::StateDict esd;
    for (auto& [n, t] : io::load_safetensors(dir + "/" + kEmaFile)) esd.emplace_back(n, t);
    run_.ema->module().load_state_dict(esd, true);
    run_.ema->set_n_averaged(state.ema->n_averaged);
  }
  if (run_.scaler.is_enabled()) {
    TR_CHECK(state.scaler, "cannot resume from ", dir, ": it has no GradScaler state");
    run_.scaler.load_state_dict(state.scaler->state);
    run_.scaler.set_skipped_steps(state.scaler->skipped_steps);
  }
}

void Checkpointer::check_data(const std::string& dir, const CheckpointState& state) {
  // what the data was fitted with or is made of (a CSV's standardisation and classes, the token
  // shards) must be the checkpoint's, and so must the sample the run continues at
  if (!state.data_state.is_null()) {
    const json now = run_.data.state.empty() ? json(nullptr) : json::parse(run_.data.state);
    TR_CHECK(now == state.data_state, "cannot resume from ", dir, ": ", data::data_state_change(state.data_state, now));
  }
  if (!state.data_position.is_null()) {
    const json now = data_position(*run_.loader, state.epoch, state.batch);
    TR_CHECK(now == state.data_position, "cannot resume from ", dir, ": its next training sample (epoch ", state.epoch,
             ", batch ", state.batch, ") was ", state.data_position.dump(), ", the data now gives ", now.dump());
  }
}

}  // namespace tr::train
