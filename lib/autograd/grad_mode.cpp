#include "autograd/grad_mode.h"
#include <atomic>

namespace tr {

namespace {
thread_local bool grad_enabled = true;
std::atomic<bool> anomaly_enabled{false};
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool on) { grad_enabled = on; }
bool AnomalyMode::is_enabled() { return anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool on) { anomaly_enabled.store(on); }

}  // namespace tr
