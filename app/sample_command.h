// `trainer sample`: text from a trained token model (nanoGPT's sample.py).
#pragma once
#include <CLI/CLI.hpp>

namespace tr::app {

void register_sample_command(CLI::App& app);

}  // namespace tr::app
