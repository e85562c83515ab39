#include "nn/layers/batch_norm.h"
#include "core/grad_mode.h"
#include "nn/layer_registry.h"
#include "nn/layers/max_pool2d.h"
#include "nn/repr.h"
#include "ops/ops.h"

namespace tr::nn {

BatchNorm::BatchNorm(std::string type_name, int64_t c, double eps_, std::optional<double> m, bool aff, bool track)
    : Module(std::move(type_name)), num_features(c), eps(eps_), momentum(m), affine(aff), track_running_stats(track) {
  TR_CHECK(c > 0, this->type_name(), ": num_features must be positive, got ", c);
  TR_CHECK(eps > 0, this->type_name(), ": eps must be positive, got ", eps);
  if (affine) {
    weight = ones({c});
    bias = zeros({c});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::I64));
  }
}

void BatchNorm::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1.0);
  num_batches_tracked.zero_();
}

// The checks of forward's input; true when the batch's statistics normalise it (training, or no
// running statistics).
bool BatchNorm::check_forward_input(const Tensor& x) const {
  check_input(x);
  TR_CHECK(x.size(1) == num_features, type_name(), "(", num_features, "): expected input with ", num_features,
           " channels in dim 1, got shape ", x.sizes());
  TR_CHECK(x.is_floating_point(), type_name(), ": expected a floating point input, got ", dtype_name(x.dtype()));
  bool batch_stats = is_training() || !track_running_stats;
  if (batch_stats) {
    int64_t n = x.numel() / num_features;
    TR_CHECK(n > 1, type_name(), ": expected more than 1 value per channel when training, got input size ", x.sizes());
  }
  return batch_stats;
}

// running = (1 - m) running + m batch, under no_grad (running_var takes the unbiased variance)
void BatchNorm::update_running_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  if (!is_training() || !track_running_stats) return;
  NoGradGuard ng;
  int64_t n = x.numel() / num_features;
  num_batches_tracked.add_(1.0);
  double m = momentum ? *momentum : 1.0 / double(num_batches_tracked.item());
  Tensor var_c = var * (double(n) / double(n - 1));
  running_mean.mul_(1.0 - m).add_(mean.to(running_mean.dtype()), m);
  running_var.mul_(1.0 - m).add_(var_c.to(running_var.dtype()), m);
}

Tensor BatchNorm::forward(const Tensor& x) { return normalize(x, check_forward_input(x)); }

Tensor BatchNorm::normalize(const Tensor& x, bool batch_stats) {
  // The fused ops of lib/ops/batch_norm.cpp; the statistics come back detached.
  BatchNormOut r = batch_norm(x, running_mean, running_var, weight, bias, batch_stats, eps);
  if (batch_stats) update_running_stats(x, r.mean, r.var);
  return r.output;
}

Tensor BatchNorm::forward_relu_max_pool(const Tensor& x, MaxPool2d& pool) {
  const bool batch_stats = check_forward_input(x);
  if (!batch_stats || x.dim() != 4) return pool.forward(relu(normalize(x, batch_stats)));
  BatchNormOut r =
      batch_norm_relu_max_pool2d(x, weight, bias, eps, pool.kernel_size, pool.stride, pool.padding, pool.dilation);
  update_running_stats(x, r.mean, r.var);
  return r.output;
}

std::string BatchNorm::extra_repr() const {
  auto b = [](bool v) { return v ? "True" : "False"; };
  return str(num_features, ", eps=", float_repr(eps), ", momentum=", momentum ? float_repr(*momentum) : "None",
             ", affine=", b(affine), ", track_running_stats=", b(track_running_stats));
}

void BatchNorm1d::check_input(const Tensor& x) const {
  TR_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d(", num_features,
           "): expected 2D or 3D input [N, C] or [N, C, L] (got ", x.dim(), "D input of shape ", x.sizes(), ")");
}

void BatchNorm2d::check_input(const Tensor& x) const {
  TR_CHECK(x.dim() == 4, "BatchNorm2d(", num_features, "): expected 4D input [N, C, H, W] (got ", x.dim(),
           "D input of shape ", x.sizes(), ")");
}

namespace {
// Keys shared by batch_norm1d and batch_norm2d; num_features is the per-sample shape's dim 0.
template <typename BN> static ModulePtr build_batch_norm(const TomlTable& t, ShapeInfo& io) {
  int64_t c = io.shape[0];
  if (t.has("num_features") && t.get_int("num_features") != c)
    layer_error(t, str("num_features = ", t.get_int("num_features"), " does not match the input shape ", io.str(),
                       " coming from the previous layer"));
  double eps = t.get_float("eps", 1e-5);
  if (eps <= 0) t.fail("eps", str("must be positive, got ", eps));
  std::optional<double> m = 0.1;
  if (const toml::node* n = t.node("momentum")) {
    if (n->is_string()) {
      if (t.get_string("momentum") != "none")
        t.fail("momentum", str("must be a number in [0, 1] or \"none\" (cumulative average), got \"",
                               t.get_string("momentum"), "\""));
      m = std::nullopt;
    } else {
      m = t.get_float("momentum");
      if (*m < 0 || *m > 1) t.fail("momentum", str("must be in [0, 1] or \"none\", got ", *m));
    }
  }
  bool affine = t.get_bool("affine", true), track = t.get_bool("track_running_stats", true);
  return std::make_shared<BN>(c, eps, m, affine, track);
}
}  // namespace

static ModulePtr build_batch_norm1d(const TomlTable& t, ShapeInfo& io) {
  if (io.shape.size() != 1 && io.shape.size() != 2)
    layer_error(t, str("expects a per-sample input of shape [C] or [C, L], but the previous layer gives ", io.str()));
  return build_batch_norm<BatchNorm1d>(t, io);
}
TR_REGISTER_LAYER("batch_norm1d",
                  "eps = 1e-5, momentum = 0.1 (or \"none\"), affine = true, track_running_stats = true, "
                  "num_features (optional check); input [C] or [C, L]",
                  build_batch_norm1d);

static ModulePtr build_batch_norm2d(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 3, "[C, H, W]");
  return build_batch_norm<BatchNorm2d>(t, io);
}
TR_REGISTER_LAYER("batch_norm2d",
                  "eps = 1e-5, momentum = 0.1 (or \"none\"), affine = true, track_running_stats = true, "
                  "num_features (optional check); input [C, H, W]",
                  build_batch_norm2d);

}  // namespace tr::nn
