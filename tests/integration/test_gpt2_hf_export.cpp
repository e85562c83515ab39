// Hugging Face's GPT-2 through the real binary: a run that starts from transformers' save_pretrained
// directory (tests/fixtures/gpt2_hf_small, generators/make_gpt2_hf_fixtures.py) with [model] init_format =
// "gpt2_hf" and does not move its weights (lr 0), exported with `trainer export --format gpt2_hf`,
// gives back transformers' file: every tensor's name, dtype, shape and bytes, and its config.
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include "integration/cli_harness.h"
#include "integration/safetensors_file.h"

namespace test_gpt2_hf_export {

using namespace it;

namespace {

void write_tokens(const fs::path& p, int n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = uint16_t((i * 37 + 11) % 97);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(2 * n));
}

}  // namespace

TEST_CASE("export --format gpt2_hf gives back transformers' save_pretrained directory", "[integration][gpt2_hf]") {
  fs::path d = fresh_dir("gpt2_hf_export");
  const std::string hf = kRepo + "/tests/fixtures/gpt2_hf_small";
  write_tokens(d / "train.bin", 300);
  write_tokens(d / "val.bin", 200);
  write(d / "hf.toml",
        "[run]\nname = \"hf\"\nthreads = 1\n[model]\nfile = '" + kRepo +
            "/tests/fixtures/gpt2_hf_small.toml'\ninit = '" + hf +
            "'\ninit_format = \"gpt2_hf\"\n[data]\ndataset = \"tokens\"\ntrain = \"train.bin\"\n"
            "eval = \"val.bin\"\nblock_size = 64\nbatch_size = 2\n[optimizer]\ntype = \"sgd\"\nlr = 0.0\n"
            "[train]\nsteps = 2\neval_batches = 1\n[log]\nprogress = \"none\"\n");
  Result r = trainer(d, "run hf.toml");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(read(d / "runs/hf/config.toml"), Contains("init_format = 'gpt2_hf'"));
  Result e = trainer(d, "export runs/hf/checkpoints/final out --format gpt2_hf");
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK_THAT(e.out, Contains("n_layer 2, n_head 2, n_embd 32, vocab 97, n_positions 64"));
  const auto ours = read_safetensors(d / "out/model.safetensors"), theirs = read_safetensors(hf + "/model.safetensors");
  REQUIRE(ours.size() == theirs.size());  // 28: lm_head.weight left out (tied), as transformers leaves it
  for (auto& [name, t] : theirs) {
    INFO(name);
    REQUIRE(ours.count(name));
    CHECK(ours.at(name).dtype == t.dtype);
    CHECK(ours.at(name).shape == t.shape);  // Conv1D weights [in, out] again
    CHECK(ours.at(name).bytes == t.bytes);
  }
  CHECK(metadata_of(d / "out/model.safetensors") == nlohmann::json{{"format", "pt"}});
  const auto cfg = nlohmann::json::parse(read(d / "out/config.json")),
             ref = nlohmann::json::parse(read(hf + "/config.json"));
  for (const char* k : {"model_type", "n_layer", "n_head", "n_embd", "vocab_size", "n_positions", "activation_function",
                        "layer_norm_epsilon"}) {
    INFO(k);
    CHECK(cfg.at(k) == ref.at(k));
  }
  // the default export is unchanged: the state_dict by its names, in its layout
  Result plain = trainer(d, "export runs/hf/checkpoints/final w.safetensors");
  REQUIRE(plain.code == 0);
  const auto w = read_safetensors(d / "w.safetensors");
  CHECK(w.at("transformer.h.0.attn.c_attn.weight").shape == std::vector<int64_t>{96, 32});
  // a checkpoint away from its run has no config to take n_head from
  fs::create_directories(d / "x/y");
  fs::copy(d / "runs/hf/checkpoints/final", d / "x/y/final", fs::copy_options::recursive);
  Result lonely = trainer(d, "export x/y/final out2 --format gpt2_hf");
  CHECK(lonely.code != 0);
  CHECK_THAT(lonely.out, Contains("no run config at") && Contains("n_head"));
  CHECK(trainer(d, "export runs/hf/checkpoints/final out3 --format onnx").code != 0);
}

}  // namespace test_gpt2_hf_export
