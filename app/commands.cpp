#include "app/commands.h"
#include <omp.h>
#include <chrono>
#include <cstdio>
#include "autograd/grad_mode.h"
#include "core/cuda_hooks.h"
#include "core/rng.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::app {

namespace {

void info() {
  std::printf("trainer (C++ tensor + autograd core)\n");
  std::printf("cpu threads: %d (OpenMP pool shared with OpenBLAS)\n", omp_get_max_threads());
  std::printf("cuda compiled: %s\n", cuda::is_compiled() ? "yes" : "no");
  std::printf("cuda libraries: %s\n", cuda::cuda_info().c_str());
  int n = cuda::device_count();
  if (n > 0) std::printf("cuda devices: %d\n", n);
  else std::printf("cuda devices: 0 (%s)\n", cuda::unavailable_reason().c_str());
}

// A two-layer MLP learning a noisy two-spirals problem with plain SGD: exercises the tensor
// core, autograd and the init functions end to end until `trainer run` exists.
int demo(int steps, uint64_t seed) {
  manual_seed(seed);
  Generator gen(seed);
  const int64_t n = 512, hidden = 64;
  Tensor t = rand({n}, {}, &gen) * 12.0;  // angle
  Tensor label = cast(rand({n}, {}, &gen) > 0.5, DType::I64);
  Tensor sgn = cast(label, DType::F32) * 2.0 - 1.0;
  Tensor r = t / 12.0;
  Tensor x = stack({sgn * r * cos(t * 0.5), sgn * r * sin(t * 0.5)}, 1) + randn({n, 2}, {}, &gen) * 0.02;

  Tensor w1 = empty({hidden, 2}), b1 = zeros({hidden}), w2 = empty({2, hidden}), b2 = zeros({2});
  init::kaiming_uniform_(w1, std::sqrt(5.0), &gen);
  init::kaiming_uniform_(w2, std::sqrt(5.0), &gen);
  std::vector<Tensor> params{w1, b1, w2, b2};
  for (auto& p : params) p.requires_grad_(true);
  auto t0 = std::chrono::steady_clock::now();
  double loss_v = 0;
  for (int step = 1; step <= steps; ++step) {
    Tensor h = tanh(linear(x, w1, b1));
    Tensor logits = linear(h, w2, b2);
    Tensor loss = cross_entropy(logits, label);
    for (auto& p : params) p.zero_grad();
    loss.backward();
    {
      NoGradGuard ng;
      for (auto& p : params) p.add_(p.grad(), -0.5);
    }
    loss_v = loss.item();
    if (step % 100 == 0 || step == 1) {
      NoGradGuard ng;
      double acc = mean(cast(argmax(logits, 1) == label, DType::F32)).item();
      std::printf("step %4d  loss %.4f  accuracy %.3f\n", step, loss_v, acc);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("trained %d steps in %.2f s (%.0f steps/s)\n", steps, secs, steps / secs);
  return 0;
}

}  // namespace

void register_commands(CLI::App& app) {
  app.add_subcommand("info", "print build and device information")->callback(info);

  auto* d = app.add_subcommand("demo", "train a small built-in MLP on synthetic spirals");
  static int steps = 1000;
  static uint64_t seed = 0;
  d->add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber);
  d->add_option("--seed", seed, "random seed");
  d->callback([] { demo(steps, seed); });
}

}  // namespace tr::app
