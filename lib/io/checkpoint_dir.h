// Checkpoint directories on disk, independent of what is in them.
//
//   <root>/step_<N>/            any files (model.safetensors, optimizer.safetensors, ...),
//                               state.json (the caller's state + {"files": {name: {crc32, size}}}),
//                               COMPLETE  ({"state.json": {crc32, size}}), written last
//   <root>/latest               "step_<N>\n": the checkpoint committed most recently
//   <root>/final/               the weights at the end of a run, written the same way; never
//                               `latest`, listed or pruned
//   <root>/.tmp-<what>-<pid>    work in progress of process <pid> (or leftovers of a dead one)
//
// A checkpoint is built in a temporary directory, every file fsynced, then renamed into place and
// the root fsynced, so a kill at any moment leaves each earlier checkpoint intact and never shows a
// half-written one under a step_<N> name. Re-saving a step swaps the directories atomically
// (renameat2 RENAME_EXCHANGE; two renames where the filesystem lacks it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "core/error.h"

namespace tr::io {

inline constexpr const char* kCheckpointStateFile = "state.json";
inline constexpr const char* kCheckpointCompleteFile = "COMPLETE";
inline constexpr const char* kCheckpointLatestFile = "latest";
inline constexpr const char* kFinalCheckpointName = "final";

std::string checkpoint_name(int64_t step);                        // "step_120"
std::optional<int64_t> checkpoint_step(const std::string& name);  // 120 for "step_120", else nullopt

struct CheckpointInfo {
  int64_t step = 0;
  std::string name;  // "step_120"
  std::string path;  // "<root>/step_120"
};

// A checkpoint that could not be written (disk full, I/O error, read-only directory): the run stops
// with this exit status unless [checkpoint] on_error = "warn". The earlier checkpoints are intact.
inline constexpr int kCheckpointWriteExitStatus = 4;
class CheckpointWriteError : public Error {
 public:
  using Error::Error;
};

// Writes one checkpoint. One writer per (root, name) per process at a time; only one process (rank 0)
// should write into a root.
class CheckpointWriter {
 public:
  // name must be step_<N> or kFinalCheckpointName. Creates root and the temporary directory
  // <root>/.tmp-<name>-<pid>.
  CheckpointWriter(std::string root, std::string name);
  // Without commit(): removes the temporary directory; nothing becomes visible.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Where to write `file` (a plain file name, not state.json or COMPLETE) before commit().
  std::string path_for(const std::string& file) const;
  const std::string& temp_dir() const { return tmp_; }
  const std::string& name() const { return name_; }

  // Records every file's crc32 and size under state["files"] (replacing any "files" key), writes
  // state.json and COMPLETE, fsyncs all, renames the directory to <root>/<name> (replacing an
  // existing one), fsyncs root, then points `latest` at it (a step_<N>). Returns the checkpoint's path.
  std::string commit(nlohmann::json state = nlohmann::json::object());
  bool committed() const { return committed_; }

 private:
  std::string root_, name_, tmp_;
  bool committed_ = false;
};

struct VerifyReport {
  bool ok = false;
  std::string dir;
  std::string file;             // the file at fault when !ok (a path)
  std::string problem;          // what is wrong with it
  nlohmann::json state;         // state.json when ok
  std::string message() const;  // "<file>: <problem>", or "ok"
};

// Checks COMPLETE, state.json against it, every listed file's size and crc32, and every listed
// *.safetensors header (without reading tensors). Never throws for a bad checkpoint: the report says.
VerifyReport verify_checkpoint(const std::string& dir);
// verify_checkpoint, throwing tr::Error with the report's message when it fails; returns state.json.
nlohmann::json load_checkpoint_state(const std::string& dir);

// Complete checkpoints (step_<N> directories holding COMPLETE), by step, oldest first. Not verified.
std::vector<CheckpointInfo> list_checkpoints(const std::string& root);
// The name `latest` holds, if it holds a step_<N> name. Not verified: may name a deleted checkpoint.
std::optional<std::string> read_latest(const std::string& root);
// The path of the newest checkpoint by step that verifies. Each newer step_<N> directory that does
// not adds a warning naming it and why, and the search falls back to the next older one.
std::optional<std::string> newest_valid_checkpoint(const std::string& root,
                                                   std::vector<std::string>* warnings = nullptr);

// Removes <root>/.tmp-* entries left by processes that are gone (pid in the name not alive, or no
// pid). Entries of live processes, this one included, are kept: a writer may be at work. A pid
// reused by an unrelated live process keeps its leftover until a later call. Returns the count.
size_t clean_temporaries(const std::string& root);
// Deletes complete checkpoints except the keep_last newest by step, keep_also (a name or path,
// e.g. the best one) and the one `latest` names. keep_last == 0 keeps everything. Returns the count.
size_t prune(const std::string& root, int keep_last, const std::optional<std::string>& keep_also = std::nullopt);

}  // namespace tr::io
