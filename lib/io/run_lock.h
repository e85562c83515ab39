// One run, one writer: rank 0 of a run holds an exclusive flock(2) on runs/<name>/.lock while it
// trains, the lock file naming the holder (pid, host, start time). A second `trainer run` on the
// same run directory is refused with those; the kernel drops the lock with its process, so a
// killed run (SIGKILL included) never leaves it stuck.
#pragma once
#include <string>

namespace tr::io {

class RunLock {
 public:
  // Takes the lock of `run_dir` (created if missing), or throws an Error naming the holder.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tr::io
