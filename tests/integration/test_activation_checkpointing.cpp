// Activation checkpointing through the real binary: gpt_char with dropout trains bit-identically
// with [model] activation_checkpointing = "blocks" and without it (losses and final weights), in f32
// and under bf16 autocast.
#include "integration/cli_harness.h"

namespace test_activation_checkpointing {

using namespace it;

TEST_CASE("activation checkpointing: gpt_char with dropout gives the same losses and weights, bit for bit",
          "[integration][checkpointing]") {
  fs::path d = fresh_dir("activation_checkpointing");
  // the repository's model with dropout in every block and in the embedding, so that the
  // recomputation must replay the forward's random numbers
  std::string model = read(kRepo + "/models/gpt_char.toml");
  const std::string block = "{ type = \"transformer_block\", n_head = 4 }";
  REQUIRE(model.find(block) != std::string::npos);
  model.replace(model.find(block), block.size(), "{ type = \"transformer_block\", n_head = 4, dropout = 0.1 }");
  model.replace(model.find("block_size = 128\n"), 17, "block_size = 128\ndropout = 0.1\n");
  write(d / "gpt_drop.toml", model);
  const std::string args =
      " --set run.out_dir=runs --set model.file=gpt_drop.toml --set train.steps=6 "
      "--set data.batch_size=4 --set train.log_every=1 --set train.eval_every=3 "
      "--set train.eval_batches=2 --set log.progress=none";
  const std::string cfg = "run '" + kRepo + "/configs/gpt_char.toml'";
  Result off = trainer(d, cfg + " --set run.name=off" + args);
  INFO(off.out);
  REQUIRE(off.code == 0);
  Result on = trainer(d, cfg + " --set run.name=on --set model.activation_checkpointing=blocks" + args);
  INFO(on.out);
  REQUIRE(on.code == 0);
  CHECK_THAT(read(d / "runs/on/config.toml"), Contains("activation_checkpointing = 'blocks'"));

  const std::string m_off = read(d / "runs/off/metrics.jsonl"), m_on = read(d / "runs/on/metrics.jsonl");
  CHECK(metric_values(m_off, "train", "loss").size() == 6);
  CHECK(metric_values(m_off, "eval", "loss").size() == 2);
  // everything but timing and memory, flops_per_step (model FLOPs, no recomputation) included
  CHECK(strip_timing(m_off) == strip_timing(m_on));
  const std::string w_off = read(d / "runs/off/checkpoints/final/model.safetensors");
  CHECK(!w_off.empty());
  CHECK(w_off == read(d / "runs/on/checkpoints/final/model.safetensors"));

  // bf16 autocast: the recomputation re-enters the forward's autocast state
  const std::string amp = " --set amp.enabled=true --set amp.dtype=bf16";
  REQUIRE(trainer(d, cfg + " --set run.name=amp_off" + amp + args).code == 0);
  REQUIRE(trainer(d, cfg + " --set run.name=amp_on --set model.activation_checkpointing=blocks" + amp + args).code ==
          0);
  CHECK(strip_timing(read(d / "runs/amp_off/metrics.jsonl")) == strip_timing(read(d / "runs/amp_on/metrics.jsonl")));
  CHECK(read(d / "runs/amp_off/checkpoints/final/model.safetensors") ==
        read(d / "runs/amp_on/checkpoints/final/model.safetensors"));

  // a policy that is not one names the key and the choices
  Result bad = trainer(d, cfg + " --set run.name=bad --set model.activation_checkpointing=all" + args);
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("activation_checkpointing") && Contains("blocks"));
  fs::remove_all(d);
}

}  // namespace test_activation_checkpointing
