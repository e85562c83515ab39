// Hugging Face's GPT-2 in and out: [model] init_format = "gpt2_hf" and save_pretrained (trainer export
// --format gpt2_hf) against transformers' own files and logits (tests/fixtures/generators/make_gpt2_hf_fixtures.py):
// a small GPT2LMHeadModel saved by save_pretrained, and OpenAI's 124M configuration filled with
// weights this test regenerates (the script's splitmix64 rule), so no 500 MB file is committed.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include "config/run_config.h"
#include "core/grad_mode.h"
#include "io/safetensors.h"
#include "nn/model_file.h"
#include "ops/ops.h"
#include "train/gpt2_hf_format.h"
#include "train/gpt2_hf_io.h"
#include "train/run_setup.h"
#include "unit/error_of.h"
#include "unit/temp_dir.h"

namespace test_gpt2_hf {

using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;

namespace {

const std::string kFixtures = TRAINER_FIXTURES_DIR;
const std::string kSmallDir = kFixtures + "/gpt2_hf_small";
const std::string kSmallModel = kFixtures + "/gpt2_hf_small.toml";

std::map<std::string, Tensor> load_map(const std::string& path) {
  std::map<std::string, Tensor> m;
  for (auto& [n, t] : io::load_safetensors(path)) m.emplace(n, t);
  return m;
}

// nanoGPT's uint16 token file of n tokens below vocab.
void write_tokens(const std::string& path, int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = uint16_t((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % vocab;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(n * 2));
}

// A run config of `model_file` (input [block]) starting from `init` with init_format = "gpt2_hf", on
// token files of the test's own.
std::string write_config(const TempDir& tmp, const std::string& model_file, const std::string& init, int64_t block,
                         int64_t vocab, const std::string& model_extra = "", const std::string& format = "gpt2_hf") {
  write_tokens(tmp / "train.bin", 3 * block, vocab, 1);
  write_tokens(tmp / "val.bin", 2 * block + 1, vocab, 2);
  const std::string path = tmp / "gpt2.toml";
  std::ofstream(path) << "[run]\nseed = 1\nout_dir = '" << tmp.path.string() << "'\n[model]\nfile = '" << model_file
                      << "'\ninit = '" << init << "'\ninit_format = \"" << format << "\"\n"
                      << model_extra
                      << "\n[data]\ndataset = \"tokens\"\ntrain = 'train.bin'\neval = 'val.bin'\nblock_size = " << block
                      << "\nbatch_size = 1\n[log]\nprogress = \"none\"\n";
  return path;
}

// The model's logits of one token sequence [T] -> [T, V], in eval mode.
Tensor logits_of(nn::Module& net, const Tensor& tokens) {
  net.eval();
  NoGradGuard ng;
  return net(tokens.unsqueeze(0)).select(0, 0).contiguous();
}

// Logits against transformers' in f32: numpy's allclose(rtol = 1e-5, atol = 1e-5 x max |theirs|) per
// sequence. The atol is the part of a logit's rounding that does not scale with the logit itself: a
// logit is a sum of n_embd products, so one near 0 carries the absolute error (~1e-6 here) of the
// large ones, and its elementwise relative difference means nothing.
struct Diff {
  double max_rel = 0;   // max |ours - theirs| / max |theirs|, over the sequences
  double max_abs = 0;   // max |ours - theirs|
  double max_elem = 0;  // max |ours - theirs| / |theirs|, elementwise (reported, not checked)
  int64_t bad = 0;      // elements outside the tolerance
};

void compare(const Tensor& ours, const Tensor& theirs, Diff& d) {
  REQUIRE(ours.sizes() == theirs.sizes());
  const Tensor a = ours.to(DType::F64).contiguous(), b = theirs.to(DType::F64).contiguous();
  const double *pa = a.data_ptr<double>(), *pb = b.data_ptr<double>();
  double scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, std::abs(pb[i]));
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double diff = std::abs(pa[i] - pb[i]);
    d.max_abs = std::max(d.max_abs, diff);
    d.max_rel = std::max(d.max_rel, diff / scale);
    d.max_elem = std::max(d.max_elem, diff / std::max(std::abs(pb[i]), 1e-30));
    d.bad += !(diff <= 1e-5 * std::abs(pb[i]) + 1e-5 * scale);
  }
}

// Every tensor of the two files: same names, dtypes, shapes and bytes.
void require_same_tensors(const std::string& ours_path, const std::string& theirs_path) {
  const auto ours = load_map(ours_path), theirs = load_map(theirs_path);
  std::vector<std::string> a, b;
  for (auto& [n, t] : ours) a.push_back(n);
  for (auto& [n, t] : theirs) b.push_back(n);
  REQUIRE(a == b);
  for (auto& [n, t] : theirs) {
    INFO(n);
    const Tensor& o = ours.at(n);
    REQUIRE(o.dtype() == t.dtype());
    REQUIRE(o.sizes() == t.sizes());
    CHECK(std::memcmp(o.contiguous().raw_data(), t.contiguous().raw_data(), size_t(t.numel()) * t.element_size()) == 0);
  }
}

// log sum_j exp(x[t, j]) of each row, in double.
Tensor logsumexp_rows(const Tensor& x) {
  const Tensor a = x.to(DType::F64).contiguous();
  const int64_t T = a.size(0), V = a.size(1);
  Tensor out = empty({T}, DType::F64);
  for (int64_t t = 0; t < T; ++t) {
    const double* row = a.data_ptr<double>() + t * V;
    const double m = *std::max_element(row, row + V);
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(row[j] - m);
    out.data_ptr<double>()[t] = m + std::log(s);
  }
  return out;
}

// ---- the 124M weights of make_gpt2_hf_fixtures.py (its docstring has the rule) ----

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

Tensor generated(const std::string& name, const Shape& shape) {
  Tensor t = empty(shape, DType::F32);
  float* p = t.data_ptr<float>();
  const uint64_t seed = fnv1a64(name);
  const bool gain = name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") || name.ends_with("ln_f.weight");
  const double centre = gain ? 1.0 : 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t z = seed + uint64_t(i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = double(int64_t(z >> 41) - (int64_t(1) << 22)) / double(1 << 22);  // exact
    p[i] = float(centre + u / 32.0);  // exact in double; one rounding to float
  }
  return t;
}

// GPT2LMHeadModel(GPT2Config())'s tensors as save_pretrained writes them (lm_head.weight tied, left out).
io::NamedTensorList gpt2_124m_hf_weights() {
  const int64_t C = 768;
  io::NamedTensorList w;
  auto add = [&](const std::string& n, const Shape& s) { w.emplace_back(n, generated(n, s)); };
  add("transformer.wte.weight", {50257, C});
  add("transformer.wpe.weight", {1024, C});
  for (int i = 0; i < 12; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    add(h + "ln_1.weight", {C});
    add(h + "ln_1.bias", {C});
    add(h + "attn.c_attn.weight", {C, 3 * C});  // Conv1D: [in, out]
    add(h + "attn.c_attn.bias", {3 * C});
    add(h + "attn.c_proj.weight", {C, C});
    add(h + "attn.c_proj.bias", {C});
    add(h + "ln_2.weight", {C});
    add(h + "ln_2.bias", {C});
    add(h + "mlp.c_fc.weight", {C, 4 * C});
    add(h + "mlp.c_fc.bias", {4 * C});
    add(h + "mlp.c_proj.weight", {4 * C, C});
    add(h + "mlp.c_proj.bias", {C});
  }
  add("transformer.ln_f.weight", {C});
  add("transformer.ln_f.bias", {C});
  return w;
}

}  // namespace

TEST_CASE("gpt2_hf init: a small GPT2LMHeadModel gives transformers' logits", "[gpt2_hf]") {
  TempDir tmp;
  const auto ref = load_map(kFixtures + "/gpt2_hf_logits.safetensors");
  // the save_pretrained directory, and its model.safetensors named directly (no config.json check then)
  for (const std::string init : {kSmallDir, kSmallDir + "/model.safetensors"}) {
    INFO(init);
    train::Run run(config::load_run_config(write_config(tmp, kSmallModel, init, 64, 97)));
    Diff d;
    for (int k = 0; ref.count("small.tokens." + std::to_string(k)); ++k)
      compare(logits_of(*run.model.net, ref.at("small.tokens." + std::to_string(k))),
              ref.at("small.logits." + std::to_string(k)), d);
    std::printf(
        "gpt2_hf small (%s): logits vs transformers: max |diff| %.3g = %.3g of the largest logit "
        "(elementwise relative %.3g)\n",
        init.ends_with(".safetensors") ? "file" : "directory", d.max_abs, d.max_rel, d.max_elem);
    CHECK(d.bad == 0);
    CHECK(d.max_rel < 1e-5);
    // one tensor under both names, the head tied to the embedding as in the model file
    auto ties = run.model.net->tied_parameters();
    REQUIRE(ties.size() == 1);
    CHECK(ties[0].first == "lm_head.weight");
    CHECK_THAT(config::to_toml(run.cfg), Contains("init_format = 'gpt2_hf'"));
  }
}

TEST_CASE("gpt2_hf export: save_pretrained's tensors exactly, and its config.json", "[gpt2_hf]") {
  TempDir tmp;
  train::Run run(config::load_run_config(write_config(tmp, kSmallModel, kSmallDir, 64, 97)));
  const std::string out = tmp / "hf";
  const auto dims = train::gpt2_hf::save_pretrained(*run.model.net, out, kSmallModel);
  CHECK(dims.n_head == 2);
  // the CI-runnable proxy of "transformers loads it": the tensors of transformers' own file, bit for bit
  require_same_tensors(out + "/model.safetensors", kSmallDir + "/model.safetensors");
  std::map<std::string, std::string> meta;
  io::load_safetensors(out + "/model.safetensors", &meta);
  CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}});
  // config.json: every field transformers wrote that says what the model computes
  std::ifstream a(out + "/config.json"), b(kSmallDir + "/config.json");
  const nlohmann::json ours = nlohmann::json::parse(a), theirs = nlohmann::json::parse(b);
  for (const char* k :
       {"model_type", "architectures", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
        "activation_function", "layer_norm_epsilon", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn", "torch_dtype", "attn_pdrop", "resid_pdrop", "embd_pdrop"}) {
    INFO(k);
    CHECK(ours.at(k) == theirs.at(k));
  }
  CHECK(ours.at("tie_word_embeddings") == true);  // transformers' default, which its file leaves out
  // what we export we import: the same logits
  train::Run again(config::load_run_config(write_config(tmp, kSmallModel, out, 64, 97)));
  const Tensor x = tensor({3, 1, 4, 1, 5, 9, 2, 6}, DType::I64);
  CHECK(equal(logits_of(*again.model.net, x), logits_of(*run.model.net, x)));
  // only the weights when OUT names a .safetensors file
  train::gpt2_hf::save_pretrained(*run.model.net, tmp / "w.safetensors", kSmallModel);
  require_same_tensors(tmp / "w.safetensors", kSmallDir + "/model.safetensors");
}

TEST_CASE("gpt2_hf init: GPT2Model's names, older files' mask buffers, lm_head.weight, an untied head", "[gpt2_hf]") {
  TempDir tmp;
  const auto ref = load_map(kFixtures + "/gpt2_hf_logits.safetensors");
  const Tensor tokens = ref.at("small.tokens.1"), want = ref.at("small.logits.1");
  auto hf = io::load_safetensors(kSmallDir + "/model.safetensors");
  auto logits_from = [&](const io::NamedTensorList& file, const std::string& model_file,
                         const std::string& extra = "") {
    std::filesystem::create_directories(tmp / "variant");
    io::save_safetensors(tmp / "variant/model.safetensors", file);
    train::Run run(config::load_run_config(write_config(tmp, model_file, tmp / "variant", 64, 97, extra)));
    return logits_of(*run.model.net, tokens);
  };
  auto agrees = [&](const Tensor& logits) {
    Diff d;
    compare(logits, want, d);
    return d.bad == 0;
  };
  SECTION("OpenAI's file on the Hub: GPT2Model's names (no transformer.), the causal-mask buffers") {
    io::NamedTensorList bare;
    for (auto& [n, t] : hf) bare.emplace_back(n.substr(std::string("transformer.").size()), t);
    for (int i = 0; i < 2; ++i) {
      Tensor mask = zeros({1, 1, 64, 64});  // torch.tril(torch.ones(...)): the causal mask
      for (int64_t r = 0; r < 64; ++r) mask.select(2, r).narrow(-1, 0, r + 1).fill_(1.0);
      bare.emplace_back(str("h.", i, ".attn.bias"), mask);
      bare.emplace_back(str("h.", i, ".attn.masked_bias"), scalar_tensor(-1e4));
    }
    CHECK(agrees(logits_from(bare, kSmallModel)));
  }
  SECTION("lm_head.weight present: equal to the embedding is the tie, different is an error") {
    Tensor wte;
    for (auto& [n, t] : hf)
      if (n == "transformer.wte.weight") wte = t;
    auto with_head = hf;
    with_head.emplace_back("lm_head.weight", wte.clone());
    CHECK(agrees(logits_from(with_head, kSmallModel)));
    with_head.back().second = wte * 2.0;
    CHECK_THAT(error_of([&] { logits_from(with_head, kSmallModel); }),
               Contains("gpt2.toml: [model] init") && Contains("variant/model.safetensors") &&
                   Contains("lm_head.weight differs from transformer.wte.weight") && Contains("ties"));
  }
  SECTION("a model file whose head is not tied gets the embedding as its head (tie_word_embeddings)") {
    std::string toml = read_file(kSmallModel);
    toml.erase(toml.find("tie = {"));
    std::ofstream(tmp / "untied.toml") << toml;
    CHECK(agrees(logits_from(hf, tmp / "untied.toml")));
    // and its export carries the head of its own
    train::Run run(config::load_run_config(write_config(tmp, tmp / "untied.toml", kSmallDir, 64, 97)));
    const auto dims = train::gpt2_hf::save_pretrained(*run.model.net, tmp / "untied_hf", tmp / "untied.toml");
    CHECK_FALSE(dims.tie_word_embeddings);
    const auto out = load_map(tmp / "untied_hf/model.safetensors");
    CHECK(equal(out.at("lm_head.weight"), out.at("transformer.wte.weight")));
  }
}

TEST_CASE("gpt2_hf init: errors name the file, the tensor and what to change", "[gpt2_hf]") {
  TempDir tmp;
  auto run_error = [&](const std::string& model_file, const std::string& init, const std::string& extra = "",
                       const std::string& format = "gpt2_hf") {
    return error_of(
        [&] { train::Run(config::load_run_config(write_config(tmp, model_file, init, 64, 97, extra, format))); });
  };
  // not a GPT-2 file: a torch state_dict of a CNN
  CHECK_THAT(run_error(kSmallModel, kFixtures + "/finetune_torch.safetensors"),
             Contains("gpt2.toml: [model] init") && Contains("finetune_torch.safetensors") && Contains("'module.") &&
                 Contains("is not a tensor of Hugging Face's GPT2LMHeadModel") && Contains("init_format = \"torch\""));
  // a shape mismatch: a model of another vocabulary, both shapes named and the model file's keys
  // (config.json says so first; without it, the tensor does)
  std::string toml = read_file(kSmallModel);
  for (size_t at; (at = toml.find("= 97")) != std::string::npos;) toml.replace(at, 4, "= 101");
  std::ofstream(tmp / "v101.toml") << toml;
  CHECK_THAT(run_error(tmp / "v101.toml", kSmallDir),
             Contains("gpt2_hf_small/config.json: vocab_size = 97 but the model (" + tmp / "v101.toml" +
                      ") has vocab_size (the embedding's num_embeddings) = 101"));
  auto hf = io::load_safetensors(kSmallDir + "/model.safetensors");
  std::filesystem::create_directories(tmp / "bad");
  auto save_variant = [&](io::NamedTensorList file) { io::save_safetensors(tmp / "bad/model.safetensors", file); };
  save_variant(hf);
  CHECK_THAT(run_error(tmp / "v101.toml", tmp / "bad"),
             Contains("bad/model.safetensors: transformer.wte.weight is [97, 32] but the model needs [101, 32]") &&
                 Contains("vocabulary is 97 and the model's 101") && Contains("num_embeddings"));
  // OpenAI's vocabulary into the padded one (models/gpt2_124m_padded.toml), at n_embd 8 to stay small
  toml = read_file(kSmallModel);
  for (size_t at; (at = toml.find("= 97")) != std::string::npos;) toml.replace(at, 4, "= 50304");
  toml.replace(toml.find("embedding_dim = 32"), 18, "embedding_dim = 8");
  std::ofstream(tmp / "padded.toml") << toml;
  nn::Model padded = nn::load_model_file(tmp / "padded.toml");
  CHECK_THAT(
      error_of([&] {
        train::gpt2_hf::from_hf({{"transformer.wte.weight", zeros({50257, 8})}}, "gpt2/model.safetensors", *padded.net);
      }),
      Contains("gpt2/model.safetensors: transformer.wte.weight is [50257, 8] but the model needs [50304, 8]") &&
          Contains("use models/gpt2_124m.toml, not the padded models/gpt2_124m_padded.toml"));
  std::ofstream(tmp / "openai.json")
      << "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 64}";  // vocab: 50257
  auto dims = train::gpt2_hf::gpt2_dims(*padded.net, "padded.toml");
  CHECK_THAT(error_of([&] { train::gpt2_hf::check_config_json(tmp / "openai.json", dims, "padded.toml"); }),
             Contains("openai.json: vocab_size = 50257 but the model (padded.toml) has vocab_size") &&
                 Contains("models/gpt2_124m.toml, not the padded"));
  // a Conv1D weight of another width: shapes in the file's [in, out] layout
  for (auto& [n, t] : hf)
    if (n == "transformer.h.1.mlp.c_fc.weight") t = zeros({32, 100});
  save_variant(hf);
  CHECK_THAT(run_error(kSmallModel, tmp / "bad"),
             Contains("bad/model.safetensors: transformer.h.1.mlp.c_fc.weight is [32, 100] (Conv1D, [in, out]) but "
                      "the model needs [32, 128] (Conv1D, [in, out])"));
  // a missing tensor: strict names it, strict = false keeps the model's own and warns
  hf = io::load_safetensors(kSmallDir + "/model.safetensors");
  std::erase_if(hf, [](const auto& kv) { return kv.first == "transformer.h.1.mlp.c_fc.bias"; });
  save_variant(hf);
  CHECK_THAT(run_error(kSmallModel, tmp / "bad"),
             Contains("missing key(s)") && Contains("transformer.h.1.mlp.c_fc.bias") && Contains("strict = false"));
  CHECK(run_error(kSmallModel, tmp / "bad", "strict = false") == "(no error)");
  // config.json: n_head shows in no shape, so the model file's must be the config's
  save_variant(io::load_safetensors(kSmallDir + "/model.safetensors"));
  std::ofstream(tmp / "bad/config.json") << "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 32, "
                                            "\"vocab_size\": 97, \"n_positions\": 64}";
  CHECK_THAT(run_error(kSmallModel, tmp / "bad"),
             Contains("bad/config.json: n_head = 4 but the model (" + kSmallModel + ") has n_head = 2"));
  std::ofstream(tmp / "bad/config.json")
      << "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 32, "
         "\"vocab_size\": 97, \"n_positions\": 64, \"activation_function\": \"relu\"}";
  CHECK_THAT(run_error(kSmallModel, tmp / "bad"), Contains("activation_function = \"relu\" but the model"));
  // the key itself
  CHECK_THAT(run_error(kSmallModel, kSmallDir, "", "gpt2"), Contains("init_format") && Contains("gpt2_hf"));
  const std::string no_init = tmp / "no_init.toml";
  std::ofstream(no_init) << "[model]\nfile = '" << kSmallModel << "'\ninit_format = \"gpt2_hf\"\n[data]\ndataset = "
                         << "\"tokens\"\n";
  CHECK_THAT(error_of([&] { config::load_run_config(no_init); }),
             Contains("'init_format' applies to starting weights"));
}

TEST_CASE("gpt2_hf export: a model GPT2LMHeadModel cannot hold is refused by name", "[gpt2_hf]") {
  TempDir tmp;
  nn::Model cnn = nn::load_model_file(kFixtures + "/export_model.toml");
  CHECK_THAT(error_of([&] { train::gpt2_hf::save_pretrained(*cnn.net, tmp / "x", "export_model.toml"); }),
             Contains("export_model.toml: not a GPT-2 model"));
  // GPT-2 without biases (bias = false): GPT2LMHeadModel has them all
  std::string toml = read_file(kSmallModel);
  toml.replace(toml.find("gelu = \"tanh\""), 13, "gelu = \"tanh\", bias = false");
  std::ofstream(tmp / "nobias.toml") << toml;
  nn::Model nobias = nn::load_model_file(tmp / "nobias.toml");
  CHECK_THAT(error_of([&] { train::gpt2_hf::save_pretrained(*nobias.net, tmp / "y", "nobias.toml"); }),
             Contains("the model has no 'transformer.h.0.ln_1.bias'"));
}

TEST_CASE("gpt2_hf init: OpenAI's 124M configuration, weights regenerated, gives transformers' logits",
          "[gpt2_hf][gpt2_124m][large]") {
  // ~1.5 GB at its peak (the model, the file's tensors while they load); a few seconds on 2 cores
  TempDir tmp;
  const auto ref = load_map(kFixtures + "/gpt2_hf_logits.safetensors");
  std::filesystem::create_directories(tmp / "hf");
  {
    io::NamedTensorList w = gpt2_124m_hf_weights();
    std::map<std::string, Tensor> by_name(w.begin(), w.end());
    const Tensor probe = cat({by_name.at("transformer.ln_f.weight").narrow(0, 0, 8),
                              by_name.at("transformer.h.0.attn.c_attn.weight").select(0, 0).narrow(0, 0, 8),
                              by_name.at("transformer.wte.weight").select(0, 50256).narrow(0, 0, 8)},
                             0);
    REQUIRE(equal(probe, ref.at("124m.probe")));  // the generator is the script's
    by_name.clear();
    io::save_safetensors(tmp / "hf/model.safetensors", w, {{"format", "pt"}});
  }
  std::ofstream(tmp / "hf/config.json") << "{\"model_type\": \"gpt2\", \"n_head\": 12}";  // GPT2Config()'s defaults
  train::Run run(config::load_run_config(
      write_config(tmp, std::string(TRAINER_FIXTURES_DIR) + "/../../models/gpt2_124m.toml", tmp / "hf", 1024, 50257)));
  const Tensor cols = ref.at("124m.columns");
  Diff d, lse;
  for (int k = 0; ref.count("124m.tokens." + std::to_string(k)); ++k) {
    const Tensor logits = logits_of(*run.model.net, ref.at("124m.tokens." + std::to_string(k)));
    compare(index_select(logits, 1, cols), ref.at("124m.logits." + std::to_string(k)), d);
    compare(logsumexp_rows(logits), ref.at("124m.logsumexp." + std::to_string(k)), lse);
  }
  std::printf(
      "gpt2_hf 124M: logits vs transformers (257 columns): max |diff| %.3g = %.3g of the largest logit "
      "(elementwise relative %.3g); logsumexp over 50257: relative %.3g\n",
      d.max_abs, d.max_rel, d.max_elem, lse.max_elem);
  CHECK(d.bad == 0);
  CHECK(d.max_rel < 1e-5);
  CHECK(lse.bad == 0);
}

}  // namespace test_gpt2_hf
