// Grad mode (torch.no_grad / enable_grad): whether ops record the autograd graph. A per-thread
// flag that every floor reads (ops skip recording, autograd records), so it lives in core.
#pragma once

namespace tr {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool on);
};

// RAII: disables gradient recording in this scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

class AutoGradMode {
 public:
  explicit AutoGradMode(bool on) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(on); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

}  // namespace tr
