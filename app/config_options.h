// The options of every command that reads a run config (run, eval, plan, sample), declared once.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tr::config {
struct RunConfig;
}

namespace tr::app {

// The run config file and its --set overrides. Added by two calls because --help lists options in
// the order they are added, and eval and sample put options of their own between the two.
struct RunConfigOptions {
  std::string file;
  std::vector<std::string> overrides;

  void add_file(CLI::App& command);
  void add_overrides(CLI::App& command);
  config::RunConfig load() const;
  // The same file and overrides as command-line arguments (for the ranks a launcher starts).
  std::vector<std::string> args() const;
};

// --checkpoint of the commands that put a checkpoint's weights into the run's model (eval, sample).
void add_checkpoint_option(CLI::App& command, std::string& checkpoint);

}  // namespace tr::app
