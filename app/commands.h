// Subcommands of the trainer binary.
#pragma once
#include <CLI/CLI.hpp>

namespace tr::app {

void register_commands(CLI::App& app);

// Thrown by a command that ends without an error but with a non-zero status (a run stopped by
// SIGINT exits 130 after its checkpoint); main returns `status`.
struct ExitStatus {
  int status;
};

}  // namespace tr::app
