// trainer: the command-line entry point. Errors from anywhere are caught here, once.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include "core/cuda_hooks.h"
#include "core/error.h"
#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"trainer: train neural networks from TOML configs"};
  app.set_version_flag("--version", "trainer " TRAINER_VERSION);
  app.require_subcommand(1);
  tr::app::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tr::app::ExitStatus& e) {
    return e.status;
  } catch (const tr::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
