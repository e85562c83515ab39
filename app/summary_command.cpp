// `trainer summary <model file | run config>`: each layer's output shape and parameter count.
#include <cstdio>
#include "app/commands.h"
#include "config/run_config.h"
#include "nn/activation_checkpoint.h"
#include "nn/model_file.h"
#include "toml/toml_table.h"

namespace tr::app {

void SummaryCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("summary", "print each layer's output shape and parameter count");
  c->add_option("file", file, "model file or run config")->required()->check(CLI::ExistingFile);
  c->callback([this] { execute(); });
}

void SummaryCommand::execute() const {
  toml::table t = parse_toml_file(file);
  nn::Model m;
  if (t.contains("layers")) {
    m = nn::load_model_file(file);
  } else {
    config::RunConfig c = config::load_run_config(file);
    if (c.model.is_inline) {
      m = nn::build_model(config::inline_model_table(c));
    } else {
      m = nn::load_model_file(c.model.file);
    }
    nn::apply_activation_checkpointing(*m.net, c.model.activation_checkpointing, file + ": [model]");
  }
  std::printf("%s", nn::model_summary(m).c_str());
}

}  // namespace tr::app
