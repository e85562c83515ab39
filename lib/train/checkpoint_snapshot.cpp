#include "train/checkpoint_snapshot.h"
#include "io/checkpoint_dir.h"

namespace tr::train {

std::string write_checkpoint_snapshot(const std::string& root, const CheckpointSnapshot& s) {
  io::CheckpointWriter w(root, s.name);
  for (const CheckpointFile& f : s.files) io::save_safetensors(w.path_for(f.name), f.tensors, f.metadata);
  const std::string path = w.commit(s.state);
  if (s.keep_last > 0) io::prune(root, s.keep_last, s.keep_also);
  return path;
}

}  // namespace tr::train
