// Decoding (nn/generate.h) and the KV cache (nn/kv_cache.h): greedy tokens equal transformers'
// generate(do_sample=False) on the same GPT-2 weights (tests/fixtures/gpt2_generate/, written by
// make_gpt2_generate_fixtures.py); with the cache, the logits equal an uncached forward's at every
// position (through the window's crop past the context, and fed in chunks); sampling is
// reproducible by seed; on CUDA ([gpu]) the same tokens as on the CPU.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "core/grad_mode.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/generate.h"
#include "nn/kv_cache.h"
#include "nn/model_file.h"
#include "ops/ops.h"
#include "unit/error_of.h"
#include "unit/fixtures.h"
#include "unit/require_gpu.h"

namespace test_generate {

using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;

namespace {

const std::string kDir = std::string(TRAINER_FIXTURES_DIR) + "/gpt2_generate";
constexpr int64_t kContext = 64;  // the fixture model's n_positions

// The fixture GPT-2 with its weights, in eval mode, as `dtype`.
nn::Model fixture_gpt2(DType dtype = DType::F32) {
  nn::Model m = nn::load_model_file(kDir + "/model.toml");
  m.net->load_state_dict(io::load_safetensors(kDir + "/model.safetensors"), true);
  if (dtype != DType::F32) m.net->to(dtype);
  m.net->eval();
  return m;
}

// gpt_char's layout (token_position_embedding, blocks, layer_norm, linear) at a small size, random.
nn::Model char_gpt(int64_t block_size) {
  const std::string src = str(R"(
input = [)",
                              block_size, R"(]
input_dtype = "int64"
[[layers]]
type = "token_position_embedding"
vocab_size = 40
n_embd = 24
block_size = )",
                              block_size, R"(
[[layers]]
type = "repeat"
times = 2
layers = [{ type = "transformer_block", n_head = 3 }]
[[layers]]
type = "layer_norm"
[[layers]]
type = "linear"
out_features = 40
)");
  manual_seed(11);
  toml::table t = toml::parse(std::string_view(src), std::string_view("char.toml"));
  nn::Model m = nn::build_model(TomlTable(t, "char.toml", "model"));
  m.net->eval();
  return m;
}

std::vector<int64_t> ints(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  const std::vector<double> v = randint(0, vocab, {n}, TensorOptions(DType::I64), &g).tolist();
  return std::vector<int64_t>(v.begin(), v.end());
}

nn::GenerateOptions greedy_options(const nlohmann::json& c, bool cache) {
  nn::GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = c["max_new_tokens"];
  o.block_size = kContext;
  if (!c["eos_token_id"].is_null()) o.eos_token = c["eos_token_id"].get<int64_t>();
  o.use_cache = cache;
  return o;
}

// max |a - b| / (atol / rtol + |b|): <= rtol means every element is within atol + rtol |b|
void check_close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a[i] - b[i]) - rtol * std::abs(b[i]);
    if (e > worst) worst = e, at = i;
  }
  INFO("element " << at << ": " << a[at] << " vs " << b[at]);
  CHECK(worst <= atol);
}

// Logits after every prefix 1..tokens.size() from a cached and an uncached decoder, compared.
void check_cache_matches(nn::Module& model, int64_t block_size, const std::vector<int64_t>& tokens, double tol) {
  nn::Decoder cached(model, block_size, true), plain(model, block_size, false);
  for (size_t n = 1; n <= tokens.size(); ++n) {
    INFO("prefix of " << n << " tokens (context " << block_size << ")");
    const std::vector<int64_t> prefix(tokens.begin(), tokens.begin() + ptrdiff_t(n));
    check_close(cached.next_logits(prefix), plain.next_logits(prefix), tol, tol);
  }
}

}  // namespace

TEST_CASE("generate: greedy tokens equal transformers' generate(do_sample=False), with and without the cache",
          "[generate]") {
  const nlohmann::json& fx = fixture_json("gpt2_generate/generate.json");
  for (DType dtype : {DType::F32, DType::F64}) {
    nn::Model m = fixture_gpt2(dtype);
    for (const auto& c : fx["cases"]) {
      for (bool cache : {true, false}) {
        INFO(dtype_name(dtype) << ", prompt " << c["prompt"].dump() << ", eos " << c["eos_token_id"].dump()
                               << (cache ? ", kv cache" : ", no cache"));
        Generator gen(0);
        CHECK(nn::generate(*m.net, ints(c["prompt"]), greedy_options(c, cache), gen) == ints(c["tokens"]));
        nn::GenerateOptions top1 = greedy_options(c, cache);  // top_k 1 is greedy too
        top1.sampling = {1.0, 1, 1.0};
        CHECK(nn::generate(*m.net, ints(c["prompt"]), top1, gen) == ints(c["tokens"]));
        CHECK(gen.get_state().offset == 0);  // greedy draws nothing
      }
    }
  }
  // the first steps' logits are transformers' (HF's scores), so the weights were converted right
  nn::Model m = fixture_gpt2();
  nn::Decoder dec(*m.net, kContext, true);
  std::vector<int64_t> seq = ints(fx["cases"][0]["prompt"]);
  const std::vector<int64_t> want = ints(fx["cases"][0]["tokens"]);
  for (size_t k = 0; k < fx["logits"].size(); ++k) {
    INFO("step " << k);
    check_close(dec.next_logits(seq), fx["logits"][k].get<std::vector<double>>(), 1e-4, 1e-5);
    seq.push_back(want[k]);
  }
}

TEST_CASE("KV cache: the logits equal an uncached forward's at every position, past the context too",
          "[generate][kv_cache]") {
  SECTION("GPT-2 layout (embedding + position_embedding), f32 and f64") {
    const std::vector<int64_t> tokens = random_tokens(kContext + 30, 96, 3);  // 30 steps of a moving window
    nn::Model m32 = fixture_gpt2();
    check_cache_matches(*m32.net, kContext, tokens, 1e-5);
    nn::Model m64 = fixture_gpt2(DType::F64);
    check_cache_matches(*m64.net, kContext, tokens, 1e-12);
  }
  SECTION("gpt_char's layout (token_position_embedding), f64") {
    nn::Model m = char_gpt(16);
    m.net->to(DType::F64);
    check_cache_matches(*m.net, 16, random_tokens(40, 40, 4), 1e-12);
  }
  SECTION("fed in chunks: several new positions attend to the cache with the causal offset") {
    nn::Model m = fixture_gpt2(DType::F64);
    const std::vector<int64_t> tokens = random_tokens(50, 96, 5);
    std::vector<double> ids(tokens.begin(), tokens.end());
    Tensor full;
    {
      NoGradGuard g;
      full = (*m.net)(from_vector(ids, {1, 50}, TensorOptions(DType::I64)));  // [1, 50, V]
    }
    nn::KVCache cache;
    int64_t at = 0;
    for (int64_t chunk : {7, 1, 12, 1, 1, 20, 8}) {
      INFO("positions " << at << ".." << at + chunk - 1);
      const std::vector<double> part(ids.begin() + at, ids.begin() + at + chunk);
      Tensor out = cache.forward(*m.net, from_vector(part, {1, chunk}, TensorOptions(DType::I64)));
      check_close(out.tolist(), full.narrow(1, at, chunk).tolist(), 1e-12, 1e-12);
      at += chunk;
      CHECK(cache.length() == at);
    }
  }
}

TEST_CASE("KV cache: active only inside its forward, positions past the context are an error that clears it",
          "[generate][kv_cache]") {
  nn::Model m = fixture_gpt2();
  nn::KVCache cache;
  CHECK(nn::KVCache::active() == nullptr);
  cache.forward(*m.net, from_vector(std::vector<double>(60, 3.0), {1, 60}, TensorOptions(DType::I64)));
  CHECK(nn::KVCache::active() == nullptr);
  CHECK(cache.length() == 60);
  const Tensor five = from_vector(std::vector<double>(5, 3.0), {1, 5}, TensorOptions(DType::I64));
  CHECK_THAT(error_of([&] { cache.forward(*m.net, five); }), Contains("positions 60..64 exceed block_size = 64"));
  CHECK(cache.length() == 0);  // cleared: some layers may have run, others not
  CHECK(nn::KVCache::active() == nullptr);
  cache.forward(*m.net, five);  // usable again from position 0
  CHECK(cache.length() == 5);
  // the training path: a forward with grad and no cache still records the graph
  Tensor out = (*m.net)(five);
  CHECK(out.requires_grad());
}

TEST_CASE("generate: sampling is reproducible by seed, seeds differ, eos stops, max_new_tokens bounds", "[generate]") {
  nn::Model m = fixture_gpt2();
  nn::GenerateOptions o;
  o.sampling = {1.5, 0, 1.0};  // flattened, so that seeds surely diverge
  o.max_new_tokens = 40;
  o.block_size = kContext;
  auto run = [&](uint64_t seed, bool cache) {
    Generator gen(seed);
    nn::GenerateOptions oc = o;
    oc.use_cache = cache;
    return nn::generate(*m.net, {1, 2, 3}, oc, gen);
  };
  const std::vector<int64_t> a = run(7, true);
  CHECK(a.size() == 40);
  CHECK(run(7, true) == a);
  CHECK(run(7, false) == a);  // the same logits, the same draws
  CHECK(run(8, true) != a);
  // top_k restricts every draw to the step's k best: with k = 2 none of the other 94 tokens appears
  // (checked against the step's logits); eos stops after itself
  o.sampling = {1.0, 2, 1.0};
  Generator gen(1);
  std::vector<int64_t> seq = {1, 2, 3};
  std::vector<int64_t> streamed;
  const std::vector<int64_t> b = nn::generate(*m.net, seq, o, gen, [&](int64_t t) { streamed.push_back(t); });
  CHECK(streamed == b);
  nn::Decoder dec(*m.net, kContext, false);
  for (int64_t t : b) {
    std::vector<double> l = dec.next_logits(seq);
    std::vector<double> sorted = l;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    CHECK(l[size_t(t)] >= sorted[1]);
    seq.push_back(t);
  }
  o.eos_token = b[3];
  Generator gen2(1);
  const std::vector<int64_t> c = nn::generate(*m.net, {1, 2, 3}, o, gen2);
  const size_t first = size_t(std::find(b.begin(), b.end(), b[3]) - b.begin());
  CHECK(c == std::vector<int64_t>(b.begin(), b.begin() + ptrdiff_t(first) + 1));
  // vocab_size: ids at or past it are never drawn
  o.eos_token.reset();
  o.sampling = {5.0, 0, 1.0};
  o.vocab_size = 4;
  Generator gen3(2);
  for (int64_t t : nn::generate(*m.net, {1}, o, gen3)) CHECK(t < 4);
  CHECK_THAT(error_of([&] { nn::generate(*m.net, {}, o, gen3); }), Contains("at least one token"));
}

TEST_CASE("generate on CUDA: the CPU's greedy tokens and logits", "[generate][gpu]") {
  TR_REQUIRE_GPU();
  const nlohmann::json& fx = fixture_json("gpt2_generate/generate.json");
  nn::Model gpu = fixture_gpt2();
  gpu.net->to(Device(DeviceType::CUDA, 0));
  for (const auto& c : fx["cases"]) {
    for (bool cache : {true, false}) {
      INFO("prompt " << c["prompt"].dump() << (cache ? ", kv cache" : ", no cache"));
      Generator gen(0);
      CHECK(nn::generate(*gpu.net, ints(c["prompt"]), greedy_options(c, cache), gen) == ints(c["tokens"]));
    }
  }
  nn::Model cpu64 = fixture_gpt2(DType::F64), gpu64 = fixture_gpt2(DType::F64);
  gpu64.net->to(Device(DeviceType::CUDA, 0));
  const std::vector<int64_t> tokens = random_tokens(kContext + 6, 96, 9);
  nn::Decoder a(*cpu64.net, kContext, true), b(*gpu64.net, kContext, true);
  for (size_t n = 1; n <= tokens.size(); n += 5) {
    INFO("prefix of " << n);
    const std::vector<int64_t> prefix(tokens.begin(), tokens.begin() + ptrdiff_t(n));
    check_close(b.next_logits(prefix), a.next_logits(prefix), 1e-10, 1e-10);
  }
  // sampling draws the same tokens: the Philox uniforms are the host's
  nn::GenerateOptions o;
  o.max_new_tokens = 30;
  o.block_size = kContext;
  Generator g1(5), g2(5);
  CHECK(nn::generate(*gpu64.net, {4, 5}, o, g1) == nn::generate(*cpu64.net, {4, 5}, o, g2));
}

}  // namespace test_generate
