// amp::GradScaler [amp][scaler]: torch 1.13's GradScaler semantics, hand-derived numbers (torch
// 1.13 has no CPU kernels for _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_):
// the walkthrough of torch.cuda.amp's docs (scale, unscale_, clip, step, update), the
// READY/UNSCALED/STEPPED state machine and its errors, skipped steps and backoff on inf/NaN,
// growth every growth_interval clean steps with float32 rounding, automatic unscale in step(),
// state_dict and the disabled scaler. (Ranks agreeing on skipped steps under DDP: the
// integration test "fp16 autocast with a loss scaler on two ranks" in tests/integration/test_ddp.cpp.)
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include "amp/grad_scaler.h"
#include "ops/ops.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"

namespace test_grad_scaler {

using namespace tr;
using amp::GradScaler;
using amp::GradScalerOptions;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::unique_ptr<optim::SGD> sgd(const std::vector<Tensor>& params, double lr = 0.001) {
  optim::SGDOptions o;
  o.lr = lr;
  return std::make_unique<optim::SGD>(params, o);
}

// One iteration with the given gradient for a single parameter x: set grad, step, update.
bool iteration(GradScaler& s, optim::Optimizer& opt, const Tensor& x, double g) {
  x.set_grad(full({2}, g));
  bool stepped = s.step(opt);
  s.update();
  return stepped;
}

}  // namespace

TEST_CASE("GradScaler: the torch.cuda.amp walkthrough (scale, unscale_, clip, step, update)", "[amp][scaler]") {
  GradScaler scaler;
  Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
  Tensor z = tensor({2., 3.}, TensorOptions().requires_grad());
  Tensor y = sum(x) + sum(z);
  auto opt = sgd({x, z});

  Tensor scaled = scaler.scale(y);
  CHECK(scaled.sizes() == Shape{1});  // y * scale, the scale a float32 tensor of shape [1]
  CHECK(scaled.item() == 8.0 * 65536.0);
  scaled.backward();
  CHECK(x.grad().tolist() == std::vector<double>{65536, 65536});
  CHECK(y.item() == 8.0);

  scaler.unscale_(*opt);
  CHECK(x.grad().tolist() == std::vector<double>{1, 1});
  CHECK(z.grad().tolist() == std::vector<double>{1, 1});
  CHECK(scaler.get_scale() == 65536.0);

  optim::clip_grad_norm({x}, 1.0);
  optim::clip_grad_norm({z}, 1.0);
  // clip_coef = 1 / (sqrt(2) + 1e-6)
  const double c = 1.0 / (std::sqrt(2.0) + 1e-6);
  CHECK(x.grad().tolist()[0] == Approx(c).epsilon(1e-6));
  CHECK(x.grad().tolist()[1] == Approx(0.70710678).epsilon(1e-6));

  CHECK(scaler.step(*opt));
  CHECK(x.tolist()[0] == Approx(1.0 - 0.001 * c).epsilon(1e-6));
  CHECK(x.tolist()[1] == Approx(1.99929289).epsilon(1e-6));
  CHECK(opt->step_count() == 1);

  scaler.update();
  CHECK(scaler.get_scale() == 65536.0);
  CHECK(scaler.growth_tracker() == 1);
  CHECK(scaler.skipped_steps() == 0);
}

TEST_CASE("GradScaler: READY / UNSCALED / STEPPED state machine errors", "[amp][scaler]") {
  GradScaler scaler;
  Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
  auto opt = sgd({x});

  CHECK_THROWS_WITH(scaler.update(), Contains("No inf checks were recorded prior to update"));

  x.set_grad(full({2}, 65536.0));
  scaler.unscale_(*opt);
  CHECK_THROWS_WITH(scaler.unscale_(*opt),
                    Contains("unscale_() has already been called on this optimizer since the last update()."));
  CHECK(scaler.step(*opt));  // UNSCALED -> STEPPED
  CHECK_THROWS_WITH(scaler.unscale_(*opt), Contains("unscale_() is being called after step()."));
  CHECK_THROWS_WITH(scaler.step(*opt), Contains("step() has already been called since the last update()."));
  scaler.update();  // back to READY: the cycle works again
  CHECK(scaler.growth_tracker() == 1);
  CHECK_THROWS_WITH(scaler.update(), Contains("No inf checks were recorded prior to update"));
  x.set_grad(full({2}, 65536.0));
  CHECK(scaler.step(*opt));
  scaler.update();
  CHECK(scaler.growth_tracker() == 2);
  CHECK(opt->step_count() == 2);

  SECTION("f16 and integer gradients are refused, the state stays READY") {
    x.set_grad(full({2}, 1.0, DType::F16));
    CHECK_THROWS_WITH(scaler.unscale_(*opt), Contains("Attempting to unscale FP16 gradients."));
    x.set_grad(full({2}, 1.0, DType::BF16));
    CHECK_THROWS_WITH(scaler.unscale_(*opt), Contains("float32 or float64") && Contains("bfloat16"));
    x.set_grad(full({2}, 65536.0));
    scaler.unscale_(*opt);
    CHECK(x.grad().tolist() == std::vector<double>{1, 1});
  }
  SECTION("an optimizer without any gradient records no inf check") {
    Tensor w = tensor({1.}, TensorOptions().requires_grad());
    auto opt2 = sgd({w});
    CHECK_THROWS_WITH(scaler.step(*opt2), Contains("No inf checks were recorded for this optimizer"));
    CHECK_THROWS_WITH(scaler.update(), Contains("No inf checks were recorded prior to update"));
  }
  SECTION("bad options") {
    CHECK_THROWS_WITH(GradScaler(GradScalerOptions{.growth_factor = 1.0}), Contains("growth factor must be > 1.0"));
    CHECK_THROWS_WITH(GradScaler(GradScalerOptions{.backoff_factor = 1.0}), Contains("backoff factor must be < 1.0"));
    CHECK_THROWS_WITH(GradScaler(GradScalerOptions{.growth_interval = 0}), Contains("growth_interval"));
    CHECK_NOTHROW(GradScaler(GradScalerOptions{.growth_factor = 1.0, .enabled = false}));
  }
}

TEST_CASE("GradScaler: inf/NaN gradients skip the step and back off, clean steps grow the scale", "[amp][scaler]") {
  SECTION("an inf gradient: parameters and step count unchanged, scale halved, tracker reset") {
    GradScaler scaler;
    Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
    Tensor z = tensor({2., 3.}, TensorOptions().requires_grad());
    auto opt = sgd({x, z});
    CHECK(iteration(scaler, *opt, x, 65536.0));  // z has no gradient: skipped
    CHECK(scaler.growth_tracker() == 1);

    x.set_grad(tensor({kInf, 65536.0}));
    z.set_grad(tensor({65536.0, 131072.0}));
    CHECK_FALSE(scaler.step(*opt));
    // grads are multiplied by inv_scale all the same (torch's kernel)
    CHECK(x.grad().tolist() == std::vector<double>{kInf, 1.0});
    CHECK(z.grad().tolist() == std::vector<double>{1.0, 2.0});
    CHECK(opt->step_count() == 1);
    CHECK(z.tolist() == std::vector<double>{2.0, 3.0});
    CHECK(scaler.skipped_steps() == 1);
    scaler.update();
    CHECK(scaler.get_scale() == 32768.0);
    CHECK(scaler.growth_tracker() == 0);
  }
  SECTION("10 steps, growth_interval 3, inf at step 3 and NaN at step 7") {
    GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
    Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
    auto opt = sgd({x});
    const std::vector<double> grads = {1, 1, kInf, 1, 1, 1, kNaN, 1, 1, 1};
    const std::vector<double> scales = {1024, 1024, 512, 512, 512, 1024, 512, 512, 512, 1024};
    const std::vector<int64_t> trackers = {1, 2, 0, 1, 2, 0, 0, 1, 2, 0};
    for (size_t i = 0; i < grads.size(); ++i) {
      INFO("step " << i + 1);
      CHECK(iteration(scaler, *opt, x, grads[i]) == std::isfinite(grads[i]));
      CHECK(scaler.get_scale() == scales[i]);
      CHECK(scaler.growth_tracker() == trackers[i]);
    }
    CHECK(scaler.skipped_steps() == 2);
    CHECK(opt->step_count() == 8);
  }
  SECTION("two optimizers: an inf in either backs off; the clean one still steps") {
    GradScaler scaler;
    Tensor a = tensor({1.}, TensorOptions().requires_grad());
    Tensor b = tensor({1.}, TensorOptions().requires_grad());
    auto oa = sgd({a}, 1.0), ob = sgd({b}, 1.0);
    a.set_grad(tensor({65536.0}));
    b.set_grad(tensor({kNaN}));
    CHECK(scaler.step(*oa));
    CHECK_FALSE(scaler.step(*ob));
    CHECK(a.item() == 0.0);
    CHECK(b.item() == 1.0);
    scaler.update();
    CHECK(scaler.get_scale() == 32768.0);
  }
  SECTION("float32 arithmetic: backoff rounds, growth never reaches inf, inv_scale is float32") {
    GradScaler scaler({.init_scale = 3.0, .backoff_factor = 0.1, .growth_interval = 1});
    Tensor x = tensor({1., 2.}, TensorOptions(DType::F64).requires_grad());
    auto opt = sgd({x});
    // f64 grad 3 * float32(1/3): the product in f64, as torch's kernel for double grads
    x.set_grad(full({2}, 3.0, DType::F64));
    scaler.unscale_(*opt);
    CHECK(x.grad().tolist()[0] == 3.0 * double(1.0f / 3.0f));
    CHECK(x.grad().tolist()[0] != 1.0);
    scaler.step(*opt);
    scaler.update();  // growth_interval 1: every clean step doubles
    CHECK(scaler.get_scale() == 6.0);
    x.set_grad(full({2}, kInf, DType::F64));
    scaler.step(*opt);
    scaler.update();
    CHECK(scaler.get_scale() == double(float(6.0 * 0.1)));
    CHECK(scaler.get_scale() != 0.6);

    scaler.update(std::ldexp(1.0, 127));  // update(new_scale) keeps the tracker
    x.set_grad(full({2}, 1.0, DType::F64));
    scaler.step(*opt);
    scaler.update();
    CHECK(scaler.get_scale() == std::ldexp(1.0, 127));  // 2^128 is inf in float32: not taken
    CHECK(scaler.growth_tracker() == 0);
  }
  SECTION("the inf check looks at the gradient before it is multiplied") {
    GradScaler scaler({.init_scale = 0.5});  // inv_scale 2: a finite 3e38 overflows to inf
    Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
    auto opt = sgd({x}, 0.0);
    x.set_grad(tensor({3e38, 1.0}));
    CHECK(scaler.step(*opt));
    CHECK(std::isinf(x.grad().tolist()[0]));
    CHECK(x.grad().tolist()[1] == 2.0);
    scaler.update();
    CHECK(scaler.get_scale() == 0.5);
  }
}

TEST_CASE("GradScaler: step() without unscale_ unscales first", "[amp][scaler]") {
  GradScaler scaler({.init_scale = 1024.0});
  Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
  auto opt = sgd({x}, 0.1);
  scaler.scale(sum(x * x)).backward();
  CHECK(x.grad().tolist() == std::vector<double>{2048, 4096});
  CHECK(scaler.step(*opt));
  CHECK(x.grad().tolist() == std::vector<double>{2, 4});  // 2x
  CHECK(x.tolist()[0] == Approx(0.8));
  CHECK(x.tolist()[1] == Approx(1.6));
  scaler.update();
  CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("GradScaler: scale() dtypes follow torch's promotion with a [1] float32 scale", "[amp][scaler]") {
  GradScaler scaler({.init_scale = 4.0});
  Tensor h = scalar_tensor(2.0, DType::F16);
  Tensor sh = scaler.scale(h);
  CHECK(sh.dtype() == DType::F32);
  CHECK(sh.sizes() == Shape{1});
  CHECK(sh.item() == 8.0);
  Tensor v = full({3}, 2.0, DType::F64);
  CHECK(scaler.scale(v).dtype() == DType::F64);
  CHECK(scaler.scale(v).tolist() == std::vector<double>{8, 8, 8});
}

TEST_CASE("GradScaler: state_dict round trip, a disabled scaler is the identity", "[amp][scaler]") {
  GradScaler a({.init_scale = 256.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 2});
  Tensor x = tensor({1., 2.}, TensorOptions().requires_grad());
  auto opt = sgd({x});
  iteration(a, *opt, x, 1.0);
  iteration(a, *opt, x, 1.0);   // grows: 1024
  iteration(a, *opt, x, kInf);  // backs off: 256
  iteration(a, *opt, x, 1.0);   // tracker 1
  nlohmann::json s = a.state_dict();
  CHECK(s == nlohmann::json{{"scale", 256.0},
                            {"growth_factor", 4.0},
                            {"backoff_factor", 0.25},
                            {"growth_interval", 2},
                            {"_growth_tracker", 1}});
  GradScaler b;
  b.load_state_dict(s);
  CHECK(b.get_scale() == 256.0);
  CHECK(b.growth_tracker() == 1);
  CHECK(b.get_growth_factor() == 4.0);
  CHECK(b.get_backoff_factor() == 0.25);
  CHECK(b.get_growth_interval() == 2);
  CHECK(b.state_dict() == s);
  iteration(b, *opt, x, 1.0);  // continues where a left off: tracker reaches 2, scale x4
  CHECK(b.get_scale() == 1024.0);

  CHECK_THROWS_WITH(b.load_state_dict(nlohmann::json::object()), Contains("state dict is empty"));
  nlohmann::json missing = s;
  missing.erase("_growth_tracker");
  CHECK_THROWS_WITH(b.load_state_dict(missing), Contains("missing key '_growth_tracker'"));

  GradScaler off({.enabled = false});
  CHECK_FALSE(off.is_enabled());
  CHECK(off.get_scale() == 1.0);
  Tensor y = sum(x);
  CHECK(off.scale(y).is_same(y));
  x.set_grad(tensor({kInf, 2.0}));
  off.unscale_(*opt);
  CHECK(x.grad().tolist() == std::vector<double>{kInf, 2.0});
  const int64_t steps = opt->step_count();
  CHECK(off.step(*opt));  // no inf check: the optimizer always steps
  CHECK(opt->step_count() == steps + 1);
  CHECK_NOTHROW(off.step(*opt));
  CHECK_NOTHROW(off.update());
  CHECK(off.state_dict() == nlohmann::json::object());
  off.load_state_dict(s);  // ignored when disabled
  CHECK(off.get_scale() == 1.0);
}

}  // namespace test_grad_scaler
