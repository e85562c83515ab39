// The Trainer returns the CPU allocator's cached blocks when evaluation starts and ends, so the
// blocks of training's batch size and of the eval batch size are never held at once.
#include <catch2/catch.hpp>
#include <fstream>
#include "config/run_config.h"
#include "core/allocator.h"
#include "ops/ops.h"
#include "train/trainer.h"
#include "unit/temp_dir.h"

namespace test_trainer_memory {

using namespace tr;

TEST_CASE("evaluate() leaves no cached CPU blocks behind", "[train][allocator]") {
  TempDir tmp;
  std::ofstream(tmp / "syn.toml")
      << "[run]\nseed = 3\nout_dir = '" << tmp.path.string()
      << "'\n[model]\ninput = [8]\n[[model.layers]]\ntype = \"linear\"\nout_features = 3\n"
         "[data]\ndataset = \"synthetic\"\nnum_classes = 3\ntrain_size = 64\neval_size = 64\n"
         "batch_size = 16\n[log]\nprogress = \"none\"\n";
  train::Trainer t(config::load_run_config(tmp / "syn.toml"));
  { Tensor block = empty({1 << 20}); }  // 4 MiB, freed into the cache
  MemoryStats m = memory_stats(kCPU);
  REQUIRE(m.reserved > m.allocated);
  train::EvalResult r = t.evaluate();
  CHECK(r.count == 64);
  m = memory_stats(kCPU);
  CHECK(m.reserved == m.allocated);
}

}  // namespace test_trainer_memory
