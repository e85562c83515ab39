#include "nn/layers/token_embedding.h"
#include "nn/kv_cache.h"
#include "nn/layer_registry.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

// A lookup table holding `weight` [num, dim]; private so that it does not clash with nn::Embedding.
class Table : public Module {
 public:
  Table(int64_t num, int64_t dim) : Module("Embedding"), num_(num), dim_(dim) {
    weight_ = empty({num, dim});
    init::normal_(weight_, 0.0, 0.02);
    register_parameter("weight", weight_);
  }
  Tensor forward(const Tensor& ids) override { return embedding(weight_, ids); }
  std::string extra_repr() const override { return str(num_, ", ", dim_); }

 private:
  int64_t num_, dim_;
  Tensor weight_;
};

}  // namespace

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab, int64_t embd, int64_t block, double p)
    : Module("TokenPositionEmbedding"), vocab_size(vocab), n_embd(embd), block_size(block), dropout(p) {
  TR_CHECK(vocab > 0 && embd > 0 && block > 0,
           "TokenPositionEmbedding: vocab_size, n_embd and block_size must be "
           "positive, got ",
           vocab, ", ", embd, ", ", block);
  TR_CHECK(p >= 0.0 && p < 1.0, "TokenPositionEmbedding: dropout must be in [0, 1), got ", p);
  wte = register_module("wte", std::make_shared<Table>(vocab, embd));
  wpe = register_module("wpe", std::make_shared<Table>(block, embd));
}

Tensor TokenPositionEmbedding::forward(const Tensor& ids) {
  TR_CHECK(ids.dim() >= 1 && !ids.is_floating_point() && ids.dtype() != DType::Bool,
           "TokenPositionEmbedding: expected integer token ids of shape [..., T], got ", dtype_name(ids.dtype()),
           " of shape ", ids.sizes());
  const int64_t T = ids.size(-1);
  // the first position: 0, or after the cached prefix while decoding (nn/kv_cache.h)
  const KVCache* cache = KVCache::active();
  const int64_t start = cache ? cache->length() : 0;
  TR_CHECK(start + T <= block_size, "TokenPositionEmbedding: cannot forward a sequence of length ", T,
           cache ? str(" after ", start, " cached positions") : std::string(), ", block_size is only ", block_size,
           " (input shape ", ids.sizes(), ")");
  Tensor pos = arange(double(start), double(start + T), 1.0, TensorOptions(DType::I64).device(ids.device()));  // [T]
  Tensor tok = (*wte)(ids);                                       // [..., T, C]
  return tr::dropout(tok + (*wpe)(pos), dropout, is_training());  // + [T, C] broadcast
}

std::string TokenPositionEmbedding::extra_repr() const {
  return str("vocab_size=", vocab_size, ", n_embd=", n_embd, ", block_size=", block_size, ", dropout=", dropout);
}

namespace {

ModulePtr build_token_position_embedding(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 1, "[T] (token ids)");
  if (is_floating(io.dtype) || io.dtype == DType::Bool)
    layer_error(t, str("expects integer token ids (int64), but the input is ", io.str()));
  int64_t vocab = t.get_int("vocab_size");
  int64_t embd = t.get_int("n_embd");
  int64_t block = t.get_int("block_size");
  if (vocab <= 0) t.fail("vocab_size", str("must be positive, got ", vocab));
  if (embd <= 0) t.fail("n_embd", str("must be positive, got ", embd));
  if (block <= 0) t.fail("block_size", str("must be positive, got ", block));
  if (io.shape[0] > block)
    layer_error(
        t, str("the input sequence length T = ", io.shape[0], " (input ", io.str(), ") exceeds block_size = ", block));
  double p = t.get_float("dropout", 0.0);
  if (p < 0.0 || p >= 1.0) t.fail("dropout", str("must be in [0, 1), got ", p));
  io.shape = {io.shape[0], embd};
  io.dtype = DType::F32;
  return std::make_shared<TokenPositionEmbedding>(vocab, embd, block, p);
}

}  // namespace

TR_REGISTER_LAYER("token_position_embedding", "vocab_size, n_embd, block_size, dropout = 0; input int64 ids [T]",
                  build_token_position_embedding);

}  // namespace tr::nn
