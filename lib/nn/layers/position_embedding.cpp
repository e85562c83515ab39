#include "nn/layers/position_embedding.h"
#include "nn/kv_cache.h"
#include "nn/layer_registry.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::nn {

PositionEmbedding::PositionEmbedding(int64_t block, int64_t embd)
    : Module("PositionEmbedding"), block_size(block), n_embd(embd) {
  TR_CHECK(block > 0 && embd > 0, "PositionEmbedding: block_size and n_embd must be positive, got ", block, " and ",
           embd);
  weight = empty({block, embd});
  init::normal_(weight);
  register_parameter("weight", weight);
}

Tensor PositionEmbedding::forward(const Tensor& x) {
  TR_CHECK(x.dim() >= 2 && x.size(-1) == n_embd, "PositionEmbedding(", extra_repr(),
           "): expected an input of shape "
           "[..., T, ",
           n_embd, "], got ", x.sizes());
  const int64_t T = x.size(-2);
  const KVCache* cache = KVCache::active();
  const int64_t start = cache ? cache->length() : 0;
  TR_CHECK(start + T <= block_size, "PositionEmbedding(", extra_repr(), "): positions ", start, "..", start + T - 1,
           " exceed block_size = ", block_size);
  return x + weight.narrow(0, start, T);  // [T, C] broadcast over the leading dims
}

std::string PositionEmbedding::extra_repr() const { return str(block_size, ", ", n_embd); }

namespace {

ModulePtr build_position_embedding(const TomlTable& t, ShapeInfo& io) {
  expect_rank(t, io, 2, "[T, C] (token embeddings)");
  expect_floating(t, io);
  const int64_t block = t.get_int("block_size");
  if (block <= 0) t.fail("block_size", str("must be positive, got ", block));
  if (io.shape[0] > block)
    layer_error(
        t, str("the input sequence length T = ", io.shape[0], " (input ", io.str(), ") exceeds block_size = ", block));
  if (t.has("n_embd") && t.get_int("n_embd") != io.shape[1])
    layer_error(t, str("n_embd = ", t.get_int("n_embd"), " does not match the input shape ", io.str(),
                       " coming from the previous layer"));
  return std::make_shared<PositionEmbedding>(block, io.shape[1]);
}

}  // namespace

TR_REGISTER_LAYER("position_embedding", "block_size, n_embd (optional check); input [T, C]: adds weight[0:T]",
                  build_position_embedding);

}  // namespace tr::nn
