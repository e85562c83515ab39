#include "app/config_options.h"
#include "config/run_config.h"

namespace tr::app {

void RunConfigOptions::add_file(CLI::App& command) {
  command.add_option("config", file, "run config file")->required()->check(CLI::ExistingFile);
}

void RunConfigOptions::add_overrides(CLI::App& command) {
  command.add_option("--set", overrides, "override a config key: section.key=value (repeatable)");
}

config::RunConfig RunConfigOptions::load() const { return config::load_run_config(file, overrides); }

std::vector<std::string> RunConfigOptions::args() const {
  std::vector<std::string> a{file};
  for (const std::string& s : overrides) a.insert(a.end(), {"--set", s});
  return a;
}

void add_checkpoint_option(CLI::App& command, std::string& checkpoint) {
  command.add_option("--checkpoint", checkpoint, "checkpoint directory or model.safetensors")->required();
}

}  // namespace tr::app
