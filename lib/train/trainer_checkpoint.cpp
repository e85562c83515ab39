// Trainer checkpoints: what a run must save to continue bit for bit (the layout docs/config.md's
// [checkpoint] gives) and how it is restored.
//   model.safetensors      the state_dict (torch's names)
//   optimizer.safetensors  per-parameter state, torch's "state.<index>.<key>" names
//   ema.safetensors        with [train] ema_decay > 0: the EMA weights, the model's state_dict names
//   state.json             position (step, epoch, batch), RNG, scheduler, optimizer groups, the
//                          progress window, metrics.jsonl's line count, the EMA's update count,
//                          the data's state (a CSV's statistics, the token shards) and where the
//                          next training sample lies, the resolved config;
//                          io::CheckpointWriter adds each file's size and checksum.
#include <cstdio>
#include <filesystem>
#include "config/config_diff.h"
#include "core/rng.h"
#include "data/data_state.h"
#include "io/async_writer.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "optim/optimizer_state.h"
#include "toml/toml_table.h"
#include "train/checkpoint_snapshot.h"
#include "train/trainer.h"

namespace tr::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Where the first sample of micro-batch `batch` of `epoch` lies in the training files
// (Dataset::locate); null when the dataset does not say or the epoch has no such batch.
json data_position(const data::DataLoader& loader, int64_t epoch, int64_t batch) {
  const std::optional<int64_t> i = loader.first_index(epoch, batch);
  const std::string at = i ? loader.dataset().locate(*i) : std::string();
  return at.empty() ? json(nullptr) : json::parse(at);
}

}  // namespace

void Trainer::save_checkpoint(const TrainPosition& pos) {
  if (run_.watchdog) run_.watchdog->begin(str("checkpoint at step ", pos.step));
  flush_steps(0);  // the progress window it saves
  // at most one write in flight: the one before ends first (and its keep_best record counts)
  collect_checkpoint_write(true);
  // keep_best: this checkpoint holds the best eval so far when the eval just before it improved
  std::optional<double> new_best;
  const auto& k = run_.cfg.checkpoint;
  if (!k.keep_best.empty() && evaluated_since_checkpoint_) {
    // (eval.accuracy is refused by the config for losses without accuracy)
    double v = k.keep_best == "eval.loss" ? last_eval_.loss : last_eval_.accuracy.value_or(0.0);
    bool better = !best_metric_ || (k.keep_best == "eval.loss" ? v < *best_metric_ : v > *best_metric_);
    if (better) new_best = v;
  }
  evaluated_since_checkpoint_ = false;

  const std::string name = io::checkpoint_name(pos.step);
  // sharded: every rank's shard gathered into torch's full layout (a collective), as an unsharded run saves it
  std::optional<optim::OptimizerState> gathered;
  if (run_.sharded_optimizer) gathered = run_.sharded_optimizer->state_dict();
  if (run_.is_main()) {
    // keep_best's record moves to this checkpoint once it is committed (a write that fails leaves it)
    CheckpointInFlight done{name, new_best ? new_best : best_metric_, new_best ? name : best_checkpoint_};
    guard_checkpoint_write(name, [&] {
      CheckpointSnapshot s = checkpoint_snapshot(name, pos, done, gathered ? *gathered : optim::state_dict(*run_.optimizer));
      if (!k.async) {
        write_checkpoint_snapshot(checkpoint_root(), s);
        best_metric_ = done.best_value;
        best_checkpoint_ = done.best_name;
        return;
      }
      // the copies are taken here, between two steps; the files are written while the next ones run
      staging_.stage(s);
      if (!writer_) writer_ = std::make_unique<io::AsyncWriter>();
      writer_->submit([root = checkpoint_root(), snap = std::make_shared<CheckpointSnapshot>(std::move(s))] {
        write_checkpoint_snapshot(root, *snap);
      });
      in_flight_ = done;
    });
  } else if (new_best) {
    best_metric_ = new_best;
  }
  // no rank goes on (and might read it, or be killed) before the checkpoint is complete; a
  // background write is waited for where the run stops (wait_for_checkpoint)
  if (run_.pg && !k.async) run_.pg->barrier();
}

CheckpointSnapshot Trainer::checkpoint_snapshot(const std::string& name, const TrainPosition& pos,
                                                const CheckpointInFlight& best, const optim::OptimizerState& os) {
  const auto& k = run_.cfg.checkpoint;
  CheckpointSnapshot s;
  s.name = name;
  // a tied parameter is written once, under its first name, as safetensors' save_model writes it
  s.files.push_back({"model.safetensors", nn::without_aliases(run_.model.net->state_dict()), {}});
  s.files.push_back({"optimizer.safetensors", io::NamedTensorList(os.tensors.begin(), os.tensors.end()), {}});
  if (run_.ema) s.files.push_back({kEmaFile, nn::without_aliases(run_.ema->module().state_dict()), {}});
  CheckpointState state;
  state.step = pos.step;
  state.epoch = pos.epoch;
  state.batch = pos.batch;
  state.rng = default_generator().get_state();
  state.optimizer_type = run_.optimizer->type_name();
  state.param_groups = os.param_groups;
  state.optimizer_step_count = os.step_count;
  if (run_.scheduler) state.scheduler = run_.scheduler->state_dict();
  if (run_.scaler.is_enabled()) state.scaler = CheckpointState::Scaler{run_.scaler.state_dict(), run_.scaler.skipped_steps()};
  if (run_.ema) state.ema = CheckpointState::Ema{run_.ema->decay(), run_.ema->n_averaged()};
  state.progress_window = progress_->window_state();
  state.metrics_lines = metrics_records();
  state.nonfinite_skipped = nonfinite_skipped_;
  if (!run_.data.state.empty()) state.data_state = json::parse(run_.data.state);
  state.data_position = data_position(*run_.loader, pos.epoch, pos.batch);
  state.world_size = run_.env.world_size;
  if (best.best_value) state.best = CheckpointState::Best{k.keep_best, *best.best_value, best.best_name};
  state.config = config::to_toml(run_.cfg);
  s.state = state.to_json();
  s.keep_last = int(k.keep_last);
  if (!best.best_name.empty()) s.keep_also = best.best_name;
  return s;
}

void Trainer::collect_checkpoint_write(bool block) {
  if (!in_flight_) return;
  const std::optional<io::AsyncWriter::Outcome> o = block ? writer_->wait() : writer_->poll();
  if (!o) return;
  const CheckpointInFlight w = *in_flight_;
  in_flight_.reset();
  guard_checkpoint_write(w.name, [&] {
    if (o->error) std::rethrow_exception(o->error);
    best_metric_ = w.best_value;
    best_checkpoint_ = w.best_name;
  });
}

void Trainer::wait_for_checkpoint() {
  if (!run_.cfg.checkpoint.async) return;  // written before save_checkpoint returned
  collect_checkpoint_write(true);
  if (run_.pg) run_.pg->barrier();  // no rank ends before the checkpoint is complete
}

void Trainer::guard_checkpoint_write(const std::string& name, const std::function<void()>& write) {
  try {
    write();
  } catch (const Error& e) {
    auto newest = io::newest_valid_checkpoint(checkpoint_root());
    std::string msg = str("cannot write checkpoint ", name, " of run ", run_.cfg.run.name, " (", checkpoint_root(), "/",
                          name, "): ", e.what(), "; the earlier checkpoints are intact (",
                          newest ? "newest: " + fs::path(*newest).filename().string() : std::string("none yet"), ")");
    if (run_.cfg.checkpoint.on_error == "warn") {
      std::fprintf(stderr, "warning: %s; training goes on ([checkpoint] on_error = \"warn\")\n", msg.c_str());
      return;
    }
    throw io::CheckpointWriteError(msg);
  }
}

void Trainer::write_final_weights(int64_t step) {
  CheckpointSnapshot s;
  s.name = io::kFinalCheckpointName;
  const std::map<std::string, std::string> meta{{"step", std::to_string(step)}};
  s.files.push_back({"model.safetensors", nn::without_aliases(run_.model.net->state_dict()), meta});
  if (run_.ema) s.files.push_back({kEmaFile, nn::without_aliases(run_.ema->module().state_dict()), meta});
  s.state = {{"step", step}, {"weights_only", true}};
  write_checkpoint_snapshot(checkpoint_root(), s);
}

std::optional<std::string> Trainer::resume_dir() const {
  if (resume_.empty()) return std::nullopt;
  if (resume_ != "auto") {
    io::load_checkpoint_state(resume_);  // an explicit checkpoint must be valid: no silent fallback
    return resume_;
  }
  if (!fs::exists(checkpoint_root())) return std::nullopt;
  std::vector<std::string> warnings;
  auto dir = io::newest_valid_checkpoint(checkpoint_root(), &warnings);
  for (auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return dir;
}

CheckpointState Trainer::restore_checkpoint(const std::string& dir) {
  const CheckpointState state =
      CheckpointState::from_json(io::load_checkpoint_state(dir), dir + "/" + io::kCheckpointStateFile);
  // the config: anything but cadence and length must be as saved
  toml::table saved = parse_toml_text(state.config, dir + "/" + io::kCheckpointStateFile + " (config)");
  toml::table now = toml::parse(config::to_toml(run_.cfg));
  std::string refused, accepted;
  for (auto& c : config::diff_configs(saved, now, run_.cfg.source.get()))
    (c.harmless ? accepted : refused) += "\n  " + c.str();
  TR_CHECK(refused.empty(), "cannot resume from ", dir, ": the config differs from the checkpoint's in keys that change the run:",
           refused, accepted.empty() ? "" : "\n(also changed, harmless:" + accepted + ")");
  if (!accepted.empty()) std::fprintf(stderr, "resuming with changed settings:%s\n", accepted.c_str());

  // model
  auto tensors = io::load_safetensors(dir + "/model.safetensors");
  nn::StateDict sd;
  for (auto& [n, t] : tensors) sd.emplace_back(n, t);
  run_.model.net->load_state_dict(sd, true);
  // optimizer, then scheduler (torch's order: the scheduler's construction set the lrs already)
  TR_CHECK(state.optimizer_type == run_.optimizer->type_name(), "cannot resume from ", dir, ": it holds ",
           state.optimizer_type, " state, the config builds ", run_.optimizer->type_name());
  optim::OptimizerState os;
  os.param_groups = state.param_groups;
  os.step_count = state.optimizer_step_count;
  for (auto& [n, t] : io::load_safetensors(dir + "/optimizer.safetensors")) os.tensors[n] = t;
  // (a sharded run keeps its pieces of the full state: any checkpoint resumes with any world size and shard)
  if (run_.sharded_optimizer) run_.sharded_optimizer->load_state_dict(os);
  else optim::load_state_dict(*run_.optimizer, os);
  if (run_.scheduler) {
    TR_CHECK(!state.scheduler.is_null(), "cannot resume from ", dir, ": it has no scheduler state");
    run_.scheduler->load_state_dict(state.scheduler);
  }
  if (run_.ema) {  // (the config check above has refused a checkpoint of a run without EMA)
    TR_CHECK(state.ema && fs::exists(dir + "/" + kEmaFile),
             "cannot resume from ", dir, ": it holds no EMA weights (", kEmaFile, ")");
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
  default_generator().set_state(state.rng);
  nonfinite_skipped_ = state.nonfinite_skipped;
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
  if (state.best) {
    best_metric_ = state.best->value;
    best_checkpoint_ = state.best->checkpoint;
  }
  return state;
}

}  // namespace tr::train
