#include "nn/layers/transformer_block.h"
#include "nn/layer_registry.h"
#include "ops/autocast.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

// The minimal LayerNorm over the last dim that a Block needs (nanoGPT's LayerNorm with optional bias);
// private so that it does not clash with the general nn::LayerNorm layer.
class BlockLayerNorm : public Module {
 public:
  BlockLayerNorm(int64_t n, bool bias) : Module("LayerNorm"), n_(n) {
    weight_ = ones({n});
    register_parameter("weight", weight_);
    if (bias) {
      bias_ = zeros({n});
      register_parameter("bias", bias_);
    }
  }
  Tensor forward(const Tensor& x) override {
    check(x);
    return layer_norm(x, {n_}, weight_, bias_, 1e-5);
  }
  // forward(x).to(out), in one kernel where there is one
  Tensor forward_to(const Tensor& x, DType out) {
    check(x);
    return layer_norm(x, {n_}, weight_, bias_, 1e-5, out);
  }
  // {x + h, forward(x + h).to(out)}, the add in the norm's kernel where there is one
  std::pair<Tensor, Tensor> add_forward_to(const Tensor& x, const Tensor& h, DType out) {
    check(x);
    return add_layer_norm(x, h, {n_}, weight_, bias_, 1e-5, out);
  }
  // whether a call may skip Module's call path (no hooks, no activation checkpointing to honour)
  bool plain() const { return !has_hooks() && !activation_checkpointing(); }
  void check(const Tensor& x) const {
    TR_CHECK(x.dim() >= 1 && x.size(-1) == n_, "LayerNorm((", n_, ",)): input of shape ", x.sizes(),
             " does not end with ", n_);
  }
  std::string extra_repr() const override {
    return str("(", n_, ",), eps=1e-05, elementwise_affine=True", bias_.defined() ? "" : ", bias=False");
  }

 private:
  int64_t n_;
  Tensor weight_, bias_;
};

void check_gelu(const std::string& g) {
  TR_CHECK(g == "none" || g == "tanh", "gelu approximate must be 'none' or 'tanh', got '", g, "'");
}

}  // namespace

TransformerMLP::TransformerMLP(int64_t n_embd, double dropout_, bool bias, std::string gelu_)
    : Module("MLP"), dropout(dropout_), gelu(std::move(gelu_)) {
  check_gelu(gelu);
  TR_CHECK(dropout >= 0.0 && dropout < 1.0, "MLP: dropout must be in [0, 1), got ", dropout);
  c_fc = register_module("c_fc", std::make_shared<Linear>(n_embd, 4 * n_embd, bias));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * n_embd, n_embd, bias));
}

Tensor TransformerMLP::forward(const Tensor& x) {
  return tr::dropout((*c_proj)(tr::gelu((*c_fc)(x), gelu)), dropout, is_training());
}

std::string TransformerMLP::extra_repr() const { return str("gelu='", gelu, "', dropout=", dropout); }

TransformerBlock::TransformerBlock(int64_t n_embd, int64_t n_head, double dropout, bool bias, std::string gelu)
    : Module("Block") {
  ln_1 = register_module("ln_1", std::make_shared<BlockLayerNorm>(n_embd, bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head, dropout, bias));
  ln_2 = register_module("ln_2", std::make_shared<BlockLayerNorm>(n_embd, bias));
  mlp = register_module("mlp", std::make_shared<TransformerMLP>(n_embd, dropout, bias, std::move(gelu)));
}

// Under autocast the norms' results go only to low-precision products (c_attn, c_fc), so the norms
// write them in the autocast dtype, and ln_2 takes in the residual add before it: the same numbers
// as the composite chain (norm in f32, rounded once; the add in f32), fewer kernels and bytes.
Tensor TransformerBlock::forward(const Tensor& x) {
  auto& n1 = static_cast<BlockLayerNorm&>(*ln_1);
  auto& n2 = static_cast<BlockLayerNorm&>(*ln_2);
  const DeviceType dev = x.device().type;
  if (!amp::autocast_active(dev) || !n1.plain() || !n2.plain()) {
    Tensor h = x + (*attn)((*ln_1)(x));
    return h + (*mlp)((*ln_2)(h));
  }
  const DType low = amp::get_autocast_dtype(dev);
  auto [h, a] = n2.add_forward_to(x, (*attn)(n1.forward_to(x, low)), low);
  return h + (*mlp)(a);
}

namespace {

ModulePtr build_transformer_block(const TomlTable& t, ShapeInfo& io) {
  AttentionArgs a = read_attention_args(t, io);
  std::string gelu = t.get_choice("gelu", {"none", "tanh"}, "none");
  return std::make_shared<TransformerBlock>(a.n_embd, a.n_head, a.dropout, t.get_bool("bias", true), gelu);
}

}  // namespace

TR_REGISTER_LAYER("transformer_block",
                  "n_head, dropout = 0, bias = true, gelu = \"none\"|\"tanh\", n_embd (optional check); input [T, C]",
                  build_transformer_block);

}  // namespace tr::nn
