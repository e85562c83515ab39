// GPT2Config from a model, and a config.json checked against one.
#include "train/gpt2_hf_config.h"
#include <cmath>
#include <fstream>
#include <optional>
#include <string_view>
#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/layer_norm.h"
#include "nn/layers/position_embedding.h"
#include "nn/layers/transformer_block.h"

namespace tr::train::gpt2_hf {

namespace {

// One value that every module of a kind must agree on (all blocks' n_head, all LayerNorms' eps).
template <typename T> void agree(std::optional<T>& seen, const T& v, const char* what, const std::string& model) {
  TR_CHECK(!seen || *seen == v, model, ": GPT2LMHeadModel has one ", what, " for every layer; the model has ", *seen,
           " and ", v);
  seen = v;
}

std::string activation_of(const std::string& gelu, const std::string& model) {
  if (gelu == "tanh") return "gelu_new";  // GPT-2's: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  if (gelu == "none") return "gelu";      // the erf form
  throw Error(str(model, ": GPT2LMHeadModel has no activation for the MLP's gelu = \"", gelu, "\""));
}

}  // namespace

Gpt2Dims gpt2_dims(nn::Module& model, const std::string& what) {
  Gpt2Dims d;
  std::optional<int64_t> n_head;
  std::optional<double> eps, dropout;
  std::optional<std::string> activation;
  bool wte = false, wpe = false;
  for (auto& [name, m] : model.named_modules()) {
    if (name == "transformer.wte") {
      auto* e = dynamic_cast<nn::Embedding*>(m);
      TR_CHECK(e, what, ": transformer.wte is a ", m->type_name(), "; GPT-2's token embedding is an embedding");
      d.vocab_size = e->num_embeddings;
      d.n_embd = e->embedding_dim;
      wte = true;
    } else if (name == "transformer.wpe") {
      auto* p = dynamic_cast<nn::PositionEmbedding*>(m);
      TR_CHECK(p, what, ": transformer.wpe is a ", m->type_name(), "; GPT-2's is a position_embedding");
      d.n_positions = p->block_size;
      wpe = true;
    } else if (name == "transformer.drop") {
      if (auto* p = dynamic_cast<nn::Dropout*>(m)) d.embd_pdrop = p->p;
    } else if (auto* b = dynamic_cast<nn::TransformerBlock*>(m)) {
      ++d.n_layer;
      agree(n_head, b->attn->n_head, "n_head", what);
      agree(dropout, b->attn->dropout, "dropout", what);
      agree(activation, activation_of(b->mlp->gelu, what), "activation", what);
    } else if (auto* ln = dynamic_cast<nn::LayerNorm*>(m)) {
      agree(eps, ln->eps, "layer_norm_epsilon", what);
    }
  }
  TR_CHECK(wte && wpe && d.n_layer > 0, what,
           ": not a GPT-2 model: GPT2LMHeadModel needs an embedding "
           "transformer.wte, a position_embedding transformer.wpe and transformer_blocks transformer.h.N (the "
           "layout of models/gpt2_124m.toml)");
  d.n_head = *n_head;
  d.attn_pdrop = d.resid_pdrop = *dropout;  // nanoGPT's one dropout for attention and residual
  d.activation_function = *activation;
  if (eps) d.layer_norm_epsilon = *eps;
  d.tie_word_embeddings = false;
  for (auto& [alias, first] : model.tied_parameters())
    if (alias == "lm_head.weight" && first == "transformer.wte.weight") d.tie_word_embeddings = true;
  return d;
}

nlohmann::json config_json(const Gpt2Dims& d, DType dtype) {
  const char* torch_dtype = dtype == DType::F32    ? "float32"
                            : dtype == DType::BF16 ? "bfloat16"
                            : dtype == DType::F16  ? "float16"
                            : dtype == DType::F64  ? "float64"
                                                   : nullptr;
  TR_CHECK(torch_dtype, "config.json: GPT2LMHeadModel's weights are floating point, not ", dtype_name(dtype));
  nlohmann::json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", d.vocab_size},
      {"n_positions", d.n_positions},
      {"n_ctx", d.n_positions},
      {"n_embd", d.n_embd},
      {"n_layer", d.n_layer},
      {"n_head", d.n_head},
      {"n_inner", nullptr},  // 4 x n_embd
      {"activation_function", d.activation_function},
      {"layer_norm_epsilon", d.layer_norm_epsilon},
      {"embd_pdrop", d.embd_pdrop},
      {"attn_pdrop", d.attn_pdrop},
      {"resid_pdrop", d.resid_pdrop},
      {"initializer_range", 0.02},
      {"scale_attn_weights", true},  // q k^T / sqrt(head size)
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", d.tie_word_embeddings},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  if (d.vocab_size > 50256) j["bos_token_id"] = j["eos_token_id"] = 50256;  // GPT-2's <|endoftext|>
  return j;
}

void check_config_json(const std::string& path, const Gpt2Dims& m, const std::string& what) {
  std::ifstream f(path);
  TR_CHECK(f, "cannot read ", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) { throw Error(str(path, ": not JSON: ", e.what())); }
  TR_CHECK(j.is_object(), path, ": expected a JSON object (GPT2Config)");
  if (j.contains("model_type"))
    TR_CHECK(j["model_type"] == "gpt2", path, ": model_type is ", j["model_type"].dump(), ", not \"gpt2\"");
  const Gpt2Dims hf_default;  // GPT2Config(): OpenAI's 124M
  auto number = [&](const char* key, double fallback) {
    if (!j.contains(key)) return fallback;
    TR_CHECK(j[key].is_number(), path, ": ", key, " is ", j[key].dump(), ", not a number");
    return j[key].get<double>();
  };
  auto check = [&](const char* key, double fallback, double ours, const char* model_key) {
    const double theirs = number(key, fallback);
    const bool openai_vocab = std::string_view(key) == "vocab_size" && theirs == 50257;
    TR_CHECK(
        std::abs(theirs - ours) <= 1e-9 * std::abs(ours), path, ": ", key, " = ", theirs, " but the model (", what,
        ") has ", model_key, " = ", ours, "; the model file must be the GPT-2 the weights were saved from",
        openai_vocab ? " (OpenAI's GPT-2: models/gpt2_124m.toml, not the padded models/gpt2_124m_padded.toml)" : "");
  };
  check("n_head", 12, double(m.n_head), "n_head");
  check("n_layer", 12, double(m.n_layer), "n_layer (transformer_blocks)");
  check("n_embd", 768, double(m.n_embd), "n_embd");
  check("vocab_size", 50257, double(m.vocab_size), "vocab_size (the embedding's num_embeddings)");
  check("n_positions", 1024, double(m.n_positions), "n_positions (position_embedding block_size)");
  check("layer_norm_epsilon", hf_default.layer_norm_epsilon, m.layer_norm_epsilon, "layer_norm_epsilon (eps)");
  const std::string act = j.value("activation_function", hf_default.activation_function);
  TR_CHECK(act == m.activation_function, path, ": activation_function = \"", act, "\" but the model (", what,
           ") has \"", m.activation_function, "\" (gelu = \"tanh\" is gelu_new, gelu = \"none\" is gelu)");
  TR_CHECK(j.value("scale_attn_weights", true) && !j.value("scale_attn_by_inverse_layer_idx", false), path,
           ": the attention scales its scores other than by 1/sqrt(head size) (scale_attn_weights = false or "
           "scale_attn_by_inverse_layer_idx = true), which the model's attention does not");
}

}  // namespace tr::train::gpt2_hf
