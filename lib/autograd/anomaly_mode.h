// Anomaly mode (torch.autograd.set_detect_anomaly): a failing backward names the forward op
// that created the failing node, and NaN gradients are errors.
#pragma once

namespace tr {

class AnomalyMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool on);
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }

 private:
  bool prev_;
};

}  // namespace tr
