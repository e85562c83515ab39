// seconds_since_process_start: the clock behind metrics.jsonl's startup_s.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include "train/process_clock.h"

namespace test_process_clock {

TEST_CASE("seconds_since_process_start counts from this process's start", "[train]") {
  const double a = tr::train::seconds_since_process_start();
  CHECK(a > 0.0);
  CHECK(a < 24 * 3600.0);  // this test process started moments ago, not at boot
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const double b = tr::train::seconds_since_process_start();
  CHECK(b - a >= 0.029);
  CHECK(b - a < 5.0);
}

}  // namespace test_process_clock
