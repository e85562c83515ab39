#include "core/grad_mode.h"

namespace tr {

namespace {
thread_local bool grad_enabled = true;
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool on) { grad_enabled = on; }

}  // namespace tr
