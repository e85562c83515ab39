// The rules of GPT2LMHeadModel's file and the two directions that read them.
#include "train/gpt2_hf_format.h"
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include "ops/ops.h"

namespace tr::train::gpt2_hf {

namespace {

// What a tensor of HF's file is to our state_dict.
enum class Kind {
  Same,    // the same tensor under the same name
  Conv1D,  // a Conv1D weight: HF's [in, out] is the transpose of our Linear's [out, in]
  Buffer,  // a causal-mask buffer of older files: no weights, dropped
};

struct Rule {
  std::string_view name;  // GPT2LMHeadModel's state_dict name; "{i}" stands for a block index
  Kind kind;
};

constexpr Rule kRules[] = {
    {"transformer.wte.weight", Kind::Same},
    {"transformer.wpe.weight", Kind::Same},
    {"transformer.h.{i}.ln_1.weight", Kind::Same},
    {"transformer.h.{i}.ln_1.bias", Kind::Same},
    {"transformer.h.{i}.attn.c_attn.weight", Kind::Conv1D},
    {"transformer.h.{i}.attn.c_attn.bias", Kind::Same},
    {"transformer.h.{i}.attn.c_proj.weight", Kind::Conv1D},
    {"transformer.h.{i}.attn.c_proj.bias", Kind::Same},
    {"transformer.h.{i}.attn.bias", Kind::Buffer},         // the causal mask, [1, 1, n_positions, n_positions]
    {"transformer.h.{i}.attn.masked_bias", Kind::Buffer},  // -1e4, a scalar
    {"transformer.h.{i}.ln_2.weight", Kind::Same},
    {"transformer.h.{i}.ln_2.bias", Kind::Same},
    {"transformer.h.{i}.mlp.c_fc.weight", Kind::Conv1D},
    {"transformer.h.{i}.mlp.c_fc.bias", Kind::Same},
    {"transformer.h.{i}.mlp.c_proj.weight", Kind::Conv1D},
    {"transformer.h.{i}.mlp.c_proj.bias", Kind::Same},
    {"transformer.ln_f.weight", Kind::Same},
    {"transformer.ln_f.bias", Kind::Same},
    {"lm_head.weight", Kind::Same},  // absent from HF's files: tied to transformer.wte.weight
};

constexpr std::string_view kHead = "lm_head.weight", kEmbedding = "transformer.wte.weight";
constexpr std::string_view kPrefix = "transformer.";

// `name` matches `pattern` with "{i}" standing for a non-empty run of digits; the index is stored.
bool matches(std::string_view pattern, std::string_view name, int64_t* index = nullptr) {
  const size_t at = pattern.find("{i}");
  if (at == std::string_view::npos) return pattern == name;
  const std::string_view head = pattern.substr(0, at), tail = pattern.substr(at + 3);
  if (name.size() <= head.size() + tail.size() || name.substr(0, head.size()) != head ||
      name.substr(name.size() - tail.size()) != tail)
    return false;
  const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
  if (index) *index = std::stoll(std::string(digits));
  return true;
}

const Rule* rule_of(std::string_view name, int64_t* index = nullptr) {
  for (const Rule& r : kRules)
    if (matches(r.name, name, index)) return &r;
  return nullptr;
}

std::string file_layout(Kind k) { return k == Kind::Conv1D ? " (Conv1D, [in, out])" : ""; }

// Why a tensor of the file does not fit the model, and what to change.
std::string shape_hint(std::string_view key, const Shape& ours, const Shape& theirs) {
  if ((key == kEmbedding || key == kHead) && ours.size() == 2 && theirs.size() == 2 && ours[0] != theirs[0])
    return str("the file's vocabulary is ", theirs[0], " and the model's ", ours[0],
               ": the model file's embedding num_embeddings and lm_head out_features must be ", theirs[0],
               theirs[0] == 50257 ? " (OpenAI's GPT-2: use models/gpt2_124m.toml, not the padded "
                                    "models/gpt2_124m_padded.toml)"
                                  : "");
  if (key == "transformer.wpe.weight" && ours.size() == 2 && theirs.size() == 2 && ours[0] != theirs[0])
    return str("the file has ", theirs[0], " positions (n_positions) and the model ", ours[0],
               ": the model file's position_embedding block_size must be ", theirs[0]);
  return "the model file's n_embd (embedding_dim) must be the file's (its config.json says which GPT-2 it is)";
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * x.element_size()) == 0;
}

// The first name of each tied parameter's later names: {"lm_head.weight": "transformer.wte.weight"}.
std::map<std::string, std::string> ties_of(const nn::Module& model) {
  std::map<std::string, std::string> m;
  for (auto& [alias, first] : model.tied_parameters()) m[alias] = first;
  return m;
}

}  // namespace

io::NamedTensorList from_hf(io::NamedTensorList tensors, const std::string& file, const nn::Module& model) {
  std::map<std::string, Shape> ours;
  for (auto& [n, t] : model.state_dict()) ours[n] = t.sizes();
  io::NamedTensorList out;
  std::map<std::string, std::string> source;  // our name -> the file's
  for (auto& [name, t] : tensors) {
    const bool bare = name.rfind(kPrefix, 0) != 0 && name != kHead;  // saved from GPT2Model
    const std::string key = bare ? std::string(kPrefix) + name : name;
    const Rule* rule = rule_of(key);
    TR_CHECK(rule, file, ": '", name,
             "' is not a tensor of Hugging Face's GPT2LMHeadModel (init_format = "
             "\"gpt2_hf\" reads transformer.wte.weight, transformer.h.N.attn.c_attn.weight, ...; init_format = "
             "\"torch\" reads a state_dict by its own names)");
    if (rule->kind == Kind::Buffer) continue;
    TR_CHECK(source.emplace(key, name).second, file, ": holds both '", source[key], "' and '", name,
             "', one tensor with and without the \"transformer.\" prefix");
    Tensor v = std::move(t);
    if (rule->kind == Kind::Conv1D) {
      TR_CHECK(v.dim() == 2, file, ": ", name, " is ", v.sizes(), "; a Conv1D weight is 2-D [in, out]");
      v = v.t().contiguous();  // nanoGPT's from_pretrained: sd[k].copy_(sd_hf[k].t())
    }
    auto it = ours.find(key);
    if (it != ours.end() && it->second != v.sizes()) {
      const Shape want = rule->kind == Kind::Conv1D ? Shape{it->second[1], it->second[0]} : it->second;
      throw Error(str(file, ": ", name, " is ", rule->kind == Kind::Conv1D ? Shape{v.size(1), v.size(0)} : v.sizes(),
                      file_layout(rule->kind), " but the model needs ", want, file_layout(rule->kind), ": ",
                      shape_hint(key, it->second, v.sizes())));
    }
    out.emplace_back(key, std::move(v));
  }
  // lm_head.weight: by the model's tie, as GPT2LMHeadModel's tie_word_embeddings
  auto find = [&](std::string_view n) -> Tensor* {
    for (auto& [k, v] : out)
      if (k == n) return &v;
    return nullptr;
  };
  const auto ties = ties_of(model);
  const auto tie = ties.find(std::string(kHead));
  Tensor *head = find(kHead), *embedding = find(kEmbedding);
  if (tie != ties.end() && tie->second == kEmbedding && head && embedding) {
    TR_CHECK(same_bytes(*head, *embedding), file, ": ", source[std::string(kHead)],
             " differs from transformer.wte.weight, but the model ties lm_head.weight to transformer.wte.weight (an "
             "untied head needs a model file without the lm_head's tie)");
    std::erase_if(out, [](const auto& kv) { return kv.first == kHead; });
  } else if (tie == ties.end() && ours.count(std::string(kHead)) && !head && embedding) {
    out.emplace_back(std::string(kHead), *embedding);
  }
  return out;
}

io::NamedTensorList to_hf(const nn::Module& model) {
  const auto ties = ties_of(model);
  io::NamedTensorList out;
  std::set<std::string> names;
  int64_t n_layer = 0;
  for (auto& [name, t] : model.state_dict()) {
    auto tie = ties.find(name);
    if (tie != ties.end()) {
      TR_CHECK(name == kHead && tie->second == kEmbedding,
               "GPT2LMHeadModel ties only lm_head.weight to "
               "transformer.wte.weight; the model ties ",
               name, " to ", tie->second);
      continue;  // save_pretrained leaves the tied head out
    }
    int64_t index = -1;
    const Rule* rule = rule_of(name, &index);
    TR_CHECK(rule && rule->kind != Kind::Buffer, "the model's tensor '", name,
             "' has no place in Hugging Face's "
             "GPT2LMHeadModel (a GPT-2 model file has nanoGPT's names and layers: models/gpt2_124m.toml)");
    n_layer = std::max(n_layer, index + 1);
    names.insert(name);
    out.emplace_back(name, rule->kind == Kind::Conv1D ? t.t().contiguous() : t.contiguous());
  }
  // every tensor GPT2LMHeadModel has (biases included: it has no bias = false)
  for (const Rule& r : kRules) {
    if (r.kind == Kind::Buffer || (r.name == kHead && ties.count(std::string(kHead)))) continue;
    const size_t at = r.name.find("{i}");
    for (int64_t i = 0; i < (at == std::string_view::npos ? 1 : n_layer); ++i) {
      const std::string name =
          at == std::string_view::npos ? std::string(r.name) : str(r.name.substr(0, at), i, r.name.substr(at + 3));
      TR_CHECK(names.count(name), "the model has no '", name, "', which Hugging Face's GPT2LMHeadModel has (",
               "its LayerNorms and projections all have biases: the GPT-2 model files' bias = true)");
    }
  }
  return out;
}

}  // namespace tr::train::gpt2_hf
