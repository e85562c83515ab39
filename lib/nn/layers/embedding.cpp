#include "nn/layers/embedding.h"
#include "core/grad_mode.h"
#include "nn/layer_registry.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::nn {

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
  TR_CHECK(num > 0 && dim > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ", num, " and ", dim);
  if (pad) {
    TR_CHECK(*pad >= -num && *pad < num, "Embedding: padding_idx must be within num_embeddings (", num, "), got ",
             *pad);
    padding_idx = *pad < 0 ? *pad + num : *pad;
  }
  weight = empty({num, dim});
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard ng;
    weight.select(0, *padding_idx).zero_();
  }
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& ids) {
  TR_CHECK(ids.dtype() == DType::I64 || ids.dtype() == DType::I32, "Embedding(", extra_repr(),
           "): expected integer ids (int64 or int32), got ", dtype_name(ids.dtype()), " of shape ", ids.sizes());
  Tensor y = embedding(weight, ids);
  if (!padding_idx) return y;
  // same values; the gradient to row padding_idx is cut (torch's embedding_backward skips it)
  Tensor keep = unsqueeze(ids != double(*padding_idx), -1);
  return where(keep, y, y.detach());
}

std::string Embedding::extra_repr() const {
  return str(num_embeddings, ", ", embedding_dim, padding_idx ? str(", padding_idx=", *padding_idx) : "");
}

static ModulePtr build_embedding(const TomlTable& t, ShapeInfo& io) {
  if (io.dtype != DType::I64)
    layer_error(t, str("expects integer token ids (int64), but the previous layer gives ", io.str()));
  int64_t num = t.get_int("num_embeddings"), dim = t.get_int("embedding_dim");
  if (num <= 0) t.fail("num_embeddings", str("must be positive, got ", num));
  if (dim <= 0) t.fail("embedding_dim", str("must be positive, got ", dim));
  std::optional<int64_t> pad;
  if (t.has("padding_idx")) {
    pad = t.get_int("padding_idx");
    if (*pad < -num || *pad >= num) t.fail("padding_idx", str("must be within num_embeddings (", num, "), got ", *pad));
  }
  io.shape.push_back(dim);
  io.dtype = DType::F32;
  return std::make_shared<Embedding>(num, dim, pad);
}
TR_REGISTER_LAYER("embedding", "num_embeddings, embedding_dim, padding_idx (optional); input int64 ids [T]",
                  build_embedding);

}  // namespace tr::nn
