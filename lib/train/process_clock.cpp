#include "train/process_clock.h"
#include <unistd.h>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

namespace tr::train {

namespace {

// The fallback origin: as early as this code can take a time of its own.
const auto static_init_time = std::chrono::steady_clock::now();

// Field 22 of /proc/self/stat (starttime, clock ticks after boot); -1 when unreadable. The
// command name (field 2) is in parentheses and may hold spaces: count fields after its ')'.
long long start_ticks() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return -1;
  try {
    return std::stoll(field);
  } catch (const std::exception&) { return -1; }
}

}  // namespace

double seconds_since_process_start() {
  const long long ticks = start_ticks();
  const long hz = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (ticks < 0 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0)
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - static_init_time).count();
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9 - double(ticks) / double(hz);
}

}  // namespace tr::train
