// `trainer export <checkpoint> <out.safetensors> [--ema]`: the model's weights alone (or the EMA
// weights), PyTorch's names; --format gpt2_hf: Hugging Face's GPT-2 (train/gpt2_hf_io.h).
#include <cstdio>
#include "app/commands.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "train/gpt2_hf_io.h"
#include "train/run_setup.h"

namespace tr::app {

namespace {

void export_weights(const std::string& dir, const std::string& out, bool ema) {
  nlohmann::json state = io::load_checkpoint_state(dir);  // verified first
  io::NamedTensorList tensors = io::load_safetensors(train::weights_file(dir, ema));
  io::save_safetensors(out, tensors, {{"format", "pt"}, {"step", std::to_string(state.value("step", int64_t(0)))}});
  std::printf("wrote %zu tensors of %s%s to %s\n", tensors.size(), dir.c_str(), ema ? " (EMA weights)" : "",
              out.c_str());
}

}  // namespace

void ExportCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("export", "write a checkpoint's model weights alone to a safetensors file");
  c->add_option("checkpoint", checkpoint, "checkpoint directory")->required();
  c->add_option("out", out, "output .safetensors file (--format gpt2_hf: a directory)")->required();
  c->add_flag("--ema", ema,
              "the EMA weights (ema.safetensors; runs with [train] ema_decay > 0) instead of the model's");
  c->add_option("--format", format,
                "torch: the state_dict by its names; gpt2_hf: a GPT-2 model as Hugging Face's save_pretrained "
                "writes GPT2LMHeadModel (OUT/model.safetensors and OUT/config.json)")
      ->check(CLI::IsMember({"torch", "gpt2_hf"}));
  c->callback([this] { execute(); });
}

void ExportCommand::execute() const {
  if (format == "gpt2_hf")
    train::gpt2_hf::export_checkpoint(checkpoint, out, ema);
  else
    export_weights(checkpoint, out, ema);
}

}  // namespace tr::app
