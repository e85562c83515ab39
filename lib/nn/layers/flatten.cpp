#include "nn/layers/flatten.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Flatten::Flatten(int64_t s, int64_t e) : Module("Flatten"), start_dim(s), end_dim(e) {}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

std::string Flatten::extra_repr() const { return str("start_dim=", start_dim, ", end_dim=", end_dim); }

// start_dim and end_dim count the batch dim, as torch's; the per-sample shape is flattened.
static ModulePtr build_flatten(const TomlTable& t, ShapeInfo& io) {
  int64_t s = t.get_int("start_dim", 1), e = t.get_int("end_dim", -1);
  int64_t n = int64_t(io.shape.size()) + 1;  // batched rank
  int64_t ws = s < 0 ? s + n : s, we = e < 0 ? e + n : e;
  if (ws < 0 || ws >= n) t.fail("start_dim", str("= ", s, " is out of range for the batched input [N] + ", io.str()));
  if (we < 0 || we >= n) t.fail("end_dim", str("= ", e, " is out of range for the batched input [N] + ", io.str()));
  if (ws == 0) t.fail("start_dim", "= 0 would merge the batch dim into the features; use start_dim >= 1");
  if (ws > we)
    t.fail("start_dim", str("= ", s, " comes after end_dim = ", e, " for the batched input [N] + ", io.str()));
  Shape out(io.shape.begin(), io.shape.begin() + (ws - 1));
  int64_t m = 1;
  for (int64_t d = ws - 1; d <= we - 1; ++d) m *= io.shape[size_t(d)];
  out.push_back(m);
  out.insert(out.end(), io.shape.begin() + we, io.shape.end());
  io.shape = out;
  return std::make_shared<Flatten>(s, e);
}
TR_REGISTER_LAYER("flatten", "start_dim = 1, end_dim = -1 (dims of the batched tensor; dim 0 is the batch)",
                  build_flatten);

}  // namespace tr::nn
