// Reading and writing Hugging Face GPT-2 directories.
#include "train/gpt2_hf_io.h"
#include <filesystem>
#include <fstream>
#include "config/run_config.h"
#include "io/checkpoint_dir.h"
#include "train/gpt2_hf_format.h"
#include "train/run_setup.h"

namespace tr::train::gpt2_hf {

namespace fs = std::filesystem;

io::NamedTensorList load_weights(const std::string& path, nn::Module& model, const std::string& what) {
  const std::string file = train::weights_file(path);  // a save_pretrained directory's model.safetensors
  const fs::path config = fs::path(file).parent_path() / "config.json";
  if (fs::exists(config)) check_config_json(config.string(), gpt2_dims(model, what), what);
  return from_hf(io::load_safetensors(file), file, model);
}

Gpt2Dims save_pretrained(nn::Module& model, const std::string& out, const std::string& what) {
  const Gpt2Dims dims = gpt2_dims(model, what);
  const io::NamedTensorList tensors = to_hf(model);
  const bool weights_only = fs::path(out).extension() == ".safetensors";
  if (!weights_only) fs::create_directories(out);
  const std::string file = weights_only ? out : (fs::path(out) / "model.safetensors").string();
  io::save_safetensors(file, tensors, {{"format", "pt"}});  // from_pretrained asks for "pt"
  if (weights_only) return dims;
  const std::string config = (fs::path(out) / "config.json").string();
  std::ofstream f(config);
  f << config_json(dims, tensors.front().second.dtype()).dump(2) << "\n";
  TR_CHECK(f.flush(), "cannot write ", config);
  return dims;
}

void export_checkpoint(const std::string& checkpoint, const std::string& out, bool ema) {
  io::load_checkpoint_state(checkpoint);  // verified first
  const std::string weights = train::weights_file(checkpoint, ema);
  // runs/<name>/checkpoints/step_<N> -> runs/<name>/config.toml
  const fs::path dir = fs::path(checkpoint).lexically_normal();
  const fs::path run_config =
      (dir.has_filename() ? dir : dir.parent_path()).parent_path().parent_path() / "config.toml";
  TR_CHECK(fs::exists(run_config), "trainer export --format gpt2_hf: no run config at ", run_config.string(),
           " (the resolved config.toml of the checkpoint's run, runs/<name>/config.toml): GPT-2's config.json "
           "needs the model file's n_head, which no weight's shape shows");
  const config::RunConfig cfg = config::load_run_config(run_config.string());
  const std::string what = cfg.model.is_inline ? cfg.path + " [model]" : cfg.model.file;
  nn::Model m = build_model(cfg);
  try {
    train::load_weights(*m.net, weights, what);
  } catch (const Error& e) { throw Error(str("trainer export: ", e.what())); }
  const Gpt2Dims d = save_pretrained(*m.net, out, what);
  std::printf(
      "wrote %s: Hugging Face's GPT2LMHeadModel (n_layer %lld, n_head %lld, n_embd %lld, vocab %lld, "
      "n_positions %lld) from %s%s\n",
      out.c_str(), (long long)d.n_layer, (long long)d.n_head, (long long)d.n_embd, (long long)d.vocab_size,
      (long long)d.n_positions, checkpoint.c_str(), ema ? " (EMA weights)" : "");
}

}  // namespace tr::train::gpt2_hf
