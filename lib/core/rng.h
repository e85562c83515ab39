// Generator: seed + Philox counter offset. The state is two integers, so it saves and restores
// exactly. default_generator() is global, as torch's default CPU generator is.
#pragma once
#include <cstdint>
#include <mutex>

namespace tr {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const GeneratorState& o) const { return seed == o.seed && offset == o.offset; }
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : state_{seed, 0} {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> g(mu_);
    state_ = {seed, 0};
  }
  uint64_t initial_seed() const { return state_.seed; }
  GeneratorState get_state() const {
    std::lock_guard<std::mutex> g(mu_);
    return state_;
  }
  void set_state(GeneratorState s) {
    std::lock_guard<std::mutex> g(mu_);
    state_ = s;
  }
  // Reserves `n` random values (n/4 Philox blocks, rounded up); returns the state to draw them from.
  GeneratorState reserve(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    GeneratorState s = state_;
    state_.offset += (n + 3) / 4;
    return s;
  }

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace tr
