// Subcommands of the trainer binary.
#pragma once
#include <CLI/CLI.hpp>

namespace tr::app {

void register_commands(CLI::App& app);

}  // namespace tr::app
