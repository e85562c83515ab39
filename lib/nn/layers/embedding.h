// Embedding: a lookup table of num_embeddings rows of size embedding_dim (torch.nn.Embedding).
#pragma once
#include <optional>
#include "nn/module.h"

namespace tr::nn {

class Embedding : public Module {
 public:
  // weight [num, dim] ~ N(0, 1) (torch's default), row padding_idx zeroed; padding_idx may be
  // negative (counted from the end, as torch).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  // ids: integer tensor of any shape [*] -> [*, dim] = weight[ids]; rows looked up at padding_idx
  // get no gradient.
  Tensor forward(const Tensor& ids) override;
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalised to [0, num_embeddings)
  Tensor weight;
};

}  // namespace tr::nn
