// The proxies of GPU speed that CI can hold without a GPU (issue 29): the CUDA emulator counts each
// training step's kernel launches (a cuBLAS GEMM, an NCCL collective: one each), copies and memsets,
// host waits (a synchronize, a synchronous copy, cudaFree) and polls, per phase of the step (the
// NVTX ranges "forward", "backward", "step" that the Trainer opens), and the peak of device memory.
// bench/gpt2_proxy.toml is GPT-2's graph and recipe at emulator size; a step's counts are the
// difference of runs of 3 and 6 steps (start-up, the first step's state allocation and the end
// cancel), a block's the difference of those differences at 2 and 4 blocks. The bench script bench/run_gpu_proxy.sh
// prints the table this prints. On a real GPU the counts file is not written and the test says so.
#include <nlohmann/json.hpp>
#include <cstdio>
#include <map>
#include "integration/cli_harness.h"
#include "integration/cuda_devices.h"
#include "integration/emulator_counts.h"

namespace test_cuda_proxy {

using namespace it;

namespace {

struct Counts {
  double kernels = 0, copies = 0, host_waits = 0, polls = 0;
  double launches() const { return kernels + copies; }
  Counts operator-(const Counts& o) const {
    return {kernels - o.kernels, copies - o.copies, host_waits - o.host_waits, polls - o.polls};
  }
  Counts operator/(double d) const { return {kernels / d, copies / d, host_waits / d, polls / d}; }
};
Counts counts_of(const nlohmann::json& j) {
  return {j.value("kernels", 0.0), j.value("copies", 0.0), j.value("host_waits", 0.0), j.value("polls", 0.0)};
}

struct Run {
  Counts total;
  std::map<std::string, Counts> ranges;  // forward, backward, step
  double peak_device_bytes = 0;
  Counts range(const std::string& r) const {
    auto it = ranges.find(r);
    return it == ranges.end() ? Counts{} : it->second;
  }
  Run operator-(const Run& o) const {
    Run d;
    d.total = total - o.total;
    for (const char* r : {"forward", "backward", "step"}) d.ranges[r] = range(r) - o.range(r);
    return d;
  }
  Run operator/(double x) const {
    Run d;
    d.total = total / x;
    for (const auto& [r, c] : ranges) d.ranges[r] = c / x;
    return d;
  }
};

// The proxy config at `blocks` transformer blocks for `steps` steps; nullopt: no counts (not the emulator).
std::optional<Run> run_proxy(const fs::path& d, int blocks, int steps, const std::string& extra = "") {
  static int runs = 0;
  std::string cfg = read(kRepo + "/bench/gpt2_proxy.toml");
  const std::string two = "times = 2,";
  REQUIRE(cfg.find(two) != std::string::npos);
  cfg.replace(cfg.find(two), two.size(), "times = " + std::to_string(blocks) + ",");
  const std::string name = "r" + std::to_string(++runs) + "_b" + std::to_string(blocks) + "_s" + std::to_string(steps);
  const auto lines =
      run_counted(d, name, cfg, "--set train.steps=" + std::to_string(steps) + " --set train.eval_batches=1 " + extra);
  if (!lines) return std::nullopt;
  Run out;
  for (const auto& j : *lines) {  // one line per process (ranks): summed
    const Counts t = counts_of(j["total"]);
    out.total = {out.total.kernels + t.kernels, out.total.copies + t.copies, out.total.host_waits + t.host_waits,
                 out.total.polls + t.polls};
    for (const auto& [k, v] : j["ranges"].items()) {
      const Counts c = counts_of(v);
      Counts& o = out.ranges[k];
      o = {o.kernels + c.kernels, o.copies + c.copies, o.host_waits + c.host_waits, o.polls + c.polls};
    }
    out.peak_device_bytes = std::max(out.peak_device_bytes, j.value("peak_device_bytes", 0.0));
  }
  return out;
}

void print_row(const char* what, const Counts& c) {
  std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", what, c.launches(), c.kernels, c.copies, c.host_waits,
              c.polls);
}

}  // namespace

TEST_CASE("cuda proxy: launches, host waits and device memory of a GPT-2 training step", "[cuda][integration][proxy]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_proxy");
  const auto a = run_proxy(d, 2, 3);
  if (!a) {
    WARN("no counts: the trainer binary is not the CUDA emulation build (counts come from tests/cuda_emu)");
    return;
  }
  const Run b = *run_proxy(d, 2, 6), c3 = *run_proxy(d, 4, 3), c = *run_proxy(d, 4, 6);
  const Run step = (b - *a) / 3.0;                      // one step at 2 blocks
  const Run block = ((c - c3) - (b - *a)) / (3 * 2.0);  // what one block adds to one step
  const Counts outside = step.total - step.range("forward") - step.range("backward") - step.range("step");
  std::printf(
      "| per training step (GPT-2 graph, bf16 autocast, AdamW, clip) | launches | kernels | copies | host waits | "
      "polls |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  print_row("one block, forward", block.range("forward"));
  print_row("one block, backward", block.range("backward"));
  print_row("one block, step phase", block.range("step"));
  print_row("whole step at 2 blocks", step.total);
  print_row("forward at 2 blocks", step.range("forward"));
  print_row("backward at 2 blocks", step.range("backward"));
  print_row("step phase (DDP, clip, optimizer) at 2 blocks", step.range("step"));
  print_row("outside the phases (data, zero_grad, logging) at 2 blocks", outside);
  std::printf("peak device bytes (emulator, 2 blocks, 4 x 64 tokens): %.0f\n", b.peak_device_bytes);

  // the composite path ([run] attention = "composite"): the same block with cuBLAS's batched
  // GEMMs and the softmax kernels in place of FlashAttention-2's
  const std::string comp = "--set 'run.attention=\"composite\"'";
  const Run ca = *run_proxy(d, 2, 3, comp), cb = *run_proxy(d, 2, 6, comp), cc3 = *run_proxy(d, 4, 3, comp),
            cc = *run_proxy(d, 4, 6, comp);
  const Run cblock = ((cc - cc3) - (cb - ca)) / (3 * 2.0);
  print_row("composite attention: one block, forward", cblock.range("forward"));
  print_row("composite attention: one block, backward", cblock.range("backward"));

  // two ranks over the emulator's NCCL (DDP): per rank (the counts of both processes, halved)
  const std::string two = "--nproc 2 --set train.tokens_per_step=512";
  const Run d3 = *run_proxy(d, 2, 3, two), d6 = *run_proxy(d, 2, 6, two);
  const Run ddp = (d6 - d3) / (3 * 2.0);
  print_row("DDP, 2 ranks: whole step per rank", ddp.total);
  print_row("DDP, 2 ranks: step phase per rank", ddp.range("step"));
  std::printf("(with 2 ranks, a rank's polls include its waits for the other at the end of the run, which vary)\n");

  // Held at the measured values + 10%: a change that adds launches or waits fails here. Lower
  // them when an optimisation lands (the targets: <= 30 launches per block forward and
  // backward, <= 20 for the whole step phase, no host wait outside log lines).
  const auto hold = [](const char* what, double measured, double held) {
    INFO(what << ": measured " << measured << ", held at " << held << " + 10%");
    CHECK(measured <= held * 1.1 + 1e-9);
  };
  const double flash_block = block.range("forward").launches() + block.range("backward").launches();
  hold("launches per block, forward + backward (flash attention, the default)", flash_block, 29);
  CHECK(flash_block <= 30);  // the target
  hold("composite attention: launches per block, forward + backward",
       cblock.range("forward").launches() + cblock.range("backward").launches(), 55);
  hold("launches per block, step phase", block.range("step").launches(), 0);
  hold("launches of the step phase at 2 blocks", step.range("step").launches(), 9);
  hold("launches per step at 2 blocks", step.total.launches(), 126);
  hold("host waits per step", step.total.host_waits, 0);
  // the pinned staging's event queries (one per staging block at each host-to-device copy: the
  // multi-tensor kernels' tables); a poll never blocks
  hold("polls per step", step.total.polls, 8);
  hold("peak device bytes at 2 blocks", b.peak_device_bytes, 140509184);
  hold("DDP: launches of the step phase per rank", ddp.range("step").launches(), 9);
  hold("DDP: host waits per step and rank", ddp.total.host_waits, 0);
}

}  // namespace test_cuda_proxy
