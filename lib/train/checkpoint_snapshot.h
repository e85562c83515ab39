// A checkpoint as values: everything a checkpoint directory will hold, taken on the training
// thread, and the one function that writes it. The synchronous path writes a snapshot at once; the
// asynchronous one ([checkpoint] async) writes a staged copy of it (train/checkpoint_staging.h)
// on a background thread. Both go through write_checkpoint_snapshot, so both write the same bytes.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "io/safetensors.h"

namespace tr::train {

struct CheckpointFile {
  std::string name;  // "model.safetensors"
  io::NamedTensorList tensors;
  std::map<std::string, std::string> metadata;  // the safetensors header's __metadata__
};

struct CheckpointSnapshot {
  std::string name;  // step_<N>, or io::kFinalCheckpointName
  std::vector<CheckpointFile> files;
  nlohmann::json state = nlohmann::json::object();  // state.json (the writer adds each file's size and crc32)
  // After the commit, and only then: io::prune(root, keep_last, keep_also) (0: nothing is pruned)
  int keep_last = 0;
  std::optional<std::string> keep_also;
};

// Writes `s` as <root>/<s.name> through io::CheckpointWriter (built in a temporary directory,
// fsynced, renamed into place: a kill at any moment leaves the earlier checkpoints intact), then
// prunes older checkpoints. Returns the checkpoint's path.
std::string write_checkpoint_snapshot(const std::string& root, const CheckpointSnapshot& s);

}  // namespace tr::train
