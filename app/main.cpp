// trainer: the command-line entry point. Errors from anywhere are caught here, once.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include "core/cuda_hooks.h"
#include <csignal>
#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"trainer: train neural networks from TOML configs"};
  app.set_version_flag("--version", "trainer " TRAINER_VERSION);
  app.require_subcommand(1);
  tr::app::Commands commands(app);
  // A file size limit (ulimit -f) reached while writing fails that write with EFBIG, an error naming
  // the file, instead of killing the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); } catch (const tr::app::ExitStatus& e) {
    return e.status;
  } catch (const tr::io::CheckpointWriteError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return tr::io::kCheckpointWriteExitStatus;
  } catch (const tr::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
