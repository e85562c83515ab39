// What a run saves to continue bit for bit (the layout docs/config.md's [checkpoint] gives):
//   model.safetensors      the state_dict (torch's names)
//   optimizer.safetensors  per-parameter state, torch's "state.<index>.<key>" names
//   ema.safetensors        with [train] ema_decay > 0: the EMA weights, the model's state_dict names
//   state.json             position (step, epoch, batch), RNG, scheduler, optimizer groups, the
//                          progress window, metrics.jsonl's line count, the EMA's update count,
//                          the data's state (a CSV's statistics, the token shards) and where the
//                          next training sample lies, the resolved config;
//                          io::CheckpointWriter adds each file's size and checksum.
#include "train/checkpointer.h"
#include <cstdio>
#include <filesystem>
#include "config/run_config.h"
#include "core/rng.h"
#include "io/checkpoint_dir.h"

namespace tr::train {

namespace fs = std::filesystem;
using nlohmann::json;

json data_position(const data::DataLoader& loader, int64_t epoch, int64_t batch) {
  const std::optional<int64_t> i = loader.first_index(epoch, batch);
  const std::string at = i ? loader.dataset().locate(*i) : std::string();
  return at.empty() ? json(nullptr) : json::parse(at);
}

void Checkpointer::evaluated(const EvalResult& e) {
  last_eval_ = e;
  evaluated_since_checkpoint_ = true;
}

std::optional<double> Checkpointer::new_best() {
  // this checkpoint holds the best eval so far when the eval just before it improved
  const auto& k = run_.cfg.checkpoint;
  const bool evaluated = evaluated_since_checkpoint_;
  evaluated_since_checkpoint_ = false;
  if (k.keep_best.empty() || !evaluated) return std::nullopt;
  // (eval.accuracy is refused by the config for losses without accuracy)
  const double v = k.keep_best == "eval.loss" ? last_eval_.loss : last_eval_.accuracy.value_or(0.0);
  const bool better = !best_metric_ || (k.keep_best == "eval.loss" ? v < *best_metric_ : v > *best_metric_);
  return better ? std::optional<double>(v) : std::nullopt;
}

void Checkpointer::save(const TrainPosition& pos, const LoopCounters& counters) {
  // at most one write in flight: the one before ends first (and its keep_best record counts)
  collect_write(true);
  const std::optional<double> best = new_best();
  const std::string name = io::checkpoint_name(pos.step);
  // sharded: every rank's shard gathered into torch's full layout (a collective), as an unsharded run saves it
  std::optional<optim::OptimizerState> gathered;
  if (run_.sharded_optimizer) gathered = run_.sharded_optimizer->state_dict();
  if (run_.is_main()) {
    // keep_best's record moves to this checkpoint once it is committed (a write that fails leaves it)
    const InFlight done{name, best ? best : best_metric_, best ? name : best_checkpoint_};
    guard_write(name, [&] { write(pos, counters, done, gathered ? *gathered : optim::state_dict(*run_.optimizer)); });
  } else if (best) {
    best_metric_ = best;
  }
  // no rank goes on (and might read it, or be killed) before the checkpoint is complete; a
  // background write is waited for where the run stops (wait)
  if (run_.pg && !run_.cfg.checkpoint.async) run_.pg->barrier();
}

void Checkpointer::write(const TrainPosition& pos, const LoopCounters& counters, const InFlight& done,
                         const optim::OptimizerState& os) {
  CheckpointSnapshot s = snapshot(pos, counters, done, os);
  if (!run_.cfg.checkpoint.async) {
    write_checkpoint_snapshot(root(), s);
    best_metric_ = done.best_value;
    best_checkpoint_ = done.best_name;
    return;
  }
  // the copies are taken here, between two steps; the files are written while the next ones run
  staging_.stage(s);
  if (!writer_) writer_ = std::make_unique<io::AsyncWriter>();
  writer_->submit([root = root(), snap = std::make_shared<CheckpointSnapshot>(std::move(s))] {
    write_checkpoint_snapshot(root, *snap);
  });
  in_flight_ = done;
}

CheckpointSnapshot Checkpointer::snapshot(const TrainPosition& pos, const LoopCounters& counters, const InFlight& best,
                                          const optim::OptimizerState& os) {
  const auto& k = run_.cfg.checkpoint;
  CheckpointSnapshot s;
  s.name = best.name;
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
  if (run_.scaler.is_enabled())
    state.scaler = CheckpointState::Scaler{run_.scaler.state_dict(), run_.scaler.skipped_steps()};
  if (run_.ema) state.ema = CheckpointState::Ema{run_.ema->decay(), run_.ema->n_averaged()};
  state.progress_window = counters.progress_window;
  state.metrics_lines = counters.metrics_lines;
  state.nonfinite_skipped = counters.nonfinite_skipped;
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

void Checkpointer::collect_write(bool block) {
  if (!in_flight_) return;
  const std::optional<io::AsyncWriter::Outcome> o = block ? writer_->wait() : writer_->poll();
  if (!o) return;
  const InFlight w = *in_flight_;
  in_flight_.reset();
  guard_write(w.name, [&] {
    if (o->error) std::rethrow_exception(o->error);
    best_metric_ = w.best_value;
    best_checkpoint_ = w.best_name;
  });
}

void Checkpointer::wait() {
  if (!run_.cfg.checkpoint.async) return;  // written before save returned
  collect_write(true);
  if (run_.pg) run_.pg->barrier();  // no rank ends before the checkpoint is complete
}

void Checkpointer::guard_write(const std::string& name, const std::function<void()>& write) {
  try {
    write();
  } catch (const Error& e) {
    auto newest = io::newest_valid_checkpoint(root());
    std::string msg = str("cannot write checkpoint ", name, " of run ", run_.cfg.run.name, " (", root(), "/", name,
                          "): ", e.what(), "; the earlier checkpoints are intact (",
                          newest ? "newest: " + fs::path(*newest).filename().string() : std::string("none yet"), ")");
    if (run_.cfg.checkpoint.on_error == "warn") {
      std::fprintf(stderr, "warning: %s; training goes on ([checkpoint] on_error = \"warn\")\n", msg.c_str());
      return;
    }
    throw io::CheckpointWriteError(msg);
  }
}

void Checkpointer::write_final_weights(int64_t step) {
  if (!run_.is_main()) return;
  guard_write(io::kFinalCheckpointName, [&] {
    CheckpointSnapshot s;
    s.name = io::kFinalCheckpointName;
    const std::map<std::string, std::string> meta{{"step", std::to_string(step)}};
    s.files.push_back({"model.safetensors", nn::without_aliases(run_.model.net->state_dict()), meta});
    if (run_.ema) s.files.push_back({kEmaFile, nn::without_aliases(run_.ema->module().state_dict()), meta});
    s.state = {{"step", step}, {"weights_only", true}};
    write_checkpoint_snapshot(root(), s);
  });
}

}  // namespace tr::train
