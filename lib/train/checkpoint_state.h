// state.json of a training checkpoint (the layout docs/config.md's [checkpoint] gives), as a typed value: the
// Trainer writes it with to_json and reads it back with from_json, which checks every key's presence
// and type and names the file and key when one is wrong. The states other owners read (the
// scheduler's, the GradScaler's, the optimizer's groups) stay JSON; their load_state_dict checks them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>
#include "core/rng.h"
#include "train/progress.h"

namespace tr::train {

struct CheckpointState {
  int64_t step = 0, epoch = 0, batch = 0;  // the position (TrainPosition)
  GeneratorState rng;
  std::string optimizer_type;
  nlohmann::json param_groups = nlohmann::json::array();  // torch's layout
  int64_t optimizer_step_count = 0;
  nlohmann::json scheduler;  // null: the run has none
  struct Scaler {
    nlohmann::json state;  // GradScaler.state_dict()
    int64_t skipped_steps = 0;
  };
  std::optional<Scaler> scaler;
  struct Ema {
    double decay = 0;
    int64_t n_averaged = 0;
  };
  std::optional<Ema> ema;
  ProgressWindow progress_window;
  int64_t metrics_lines = 0;      // metrics.jsonl's records at the checkpoint
  int64_t nonfinite_skipped = 0;  // steps [train] nonfinite = "skip" left out
  nlohmann::json data_state;      // what the data was fitted with or is made of (a CSV's statistics, the
                                  // token shards); null: nothing
  nlohmann::json data_position;   // where the next training sample lies (data::Dataset::locate: a token
                                  // window's shard and offset); null: not recorded
  int64_t world_size = 1;
  struct Best {
    std::string metric;
    double value = 0;
    std::string checkpoint;
  };
  std::optional<Best> best;  // [checkpoint] keep_best
  std::string config;        // the resolved config, TOML

  nlohmann::json to_json() const;
  // `file` names state.json in errors. A checkpoint of weights only (checkpoints/final) is refused.
  static CheckpointState from_json(const nlohmann::json& j, const std::string& file);
};

}  // namespace tr::train
