// SIGINT / SIGTERM during training: the first one asks the loop to finish its current step, write
// a checkpoint and exit (130 / 143); a second one aborts at once (the default action). The flag a
// signal handler sets is necessarily process-global; nothing else here is.
#pragma once

namespace tr::train {

class StopSignal {
 public:
  // Installs the handlers for the lifetime of this object (the previous ones come back after).
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The signal received (SIGINT, SIGTERM) or 0.
  int pending() const;
  // The conventional exit status after stopping on `sig`: 128 + sig (130, 143).
  static int exit_status(int sig) { return 128 + sig; }
};

}  // namespace tr::train
