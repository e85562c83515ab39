#include "autograd/anomaly_mode.h"
#include <atomic>

namespace tr {

namespace {
std::atomic<bool> anomaly_enabled{false};
}  // namespace

bool AnomalyMode::is_enabled() { return anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool on) { anomaly_enabled.store(on); }

}  // namespace tr
