#include "train/checkpoint_snapshot.h"
#include <chrono>
#include <cstdlib>
#include <thread>
#include "io/checkpoint_dir.h"

namespace tr::train {

namespace {

// TR_TEST_CHECKPOINT_WRITE_MS=n: every checkpoint write pauses n ms between its files and its
// commit, so that the tests and scripts/soak.sh can land a signal or a SIGKILL inside a write
// (a small model's write otherwise lasts a few ms).
std::chrono::milliseconds test_write_pause() {
  static const long ms = [] {
    const char* v = std::getenv("TR_TEST_CHECKPOINT_WRITE_MS");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  return std::chrono::milliseconds(ms > 0 ? ms : 0);
}

}  // namespace

std::string write_checkpoint_snapshot(const std::string& root, const CheckpointSnapshot& s) {
  io::CheckpointWriter w(root, s.name);
  for (const CheckpointFile& f : s.files) io::save_safetensors(w.path_for(f.name), f.tensors, f.metadata);
  if (test_write_pause().count() > 0) std::this_thread::sleep_for(test_write_pause());
  const std::string path = w.commit(s.state);
  if (s.keep_last > 0) io::prune(root, s.keep_last, s.keep_also);
  return path;
}

}  // namespace tr::train
