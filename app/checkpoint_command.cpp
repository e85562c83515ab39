// `trainer checkpoint verify <dir>`: sizes, checksums and safetensors headers, without a model.
#include <cstdio>
#include "app/commands.h"
#include "core/error.h"
#include "io/checkpoint_dir.h"

namespace tr::app {

void CheckpointVerifyCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("checkpoint", "inspect checkpoints");
  c->require_subcommand(1);
  auto* v =
      c->add_subcommand("verify", "check a checkpoint's files (sizes, checksums, headers) without loading a model");
  v->add_option("dir", dir, "checkpoint directory (runs/<name>/checkpoints/step_<N>)")->required();
  v->callback([this] { execute(); });
}

void CheckpointVerifyCommand::execute() const {
  io::VerifyReport r = io::verify_checkpoint(dir);
  if (!r.ok) throw Error(str("checkpoint ", dir, " is not valid: ", r.message()));
  std::printf("%s: ok (step %lld, %zu files)\n", dir.c_str(), (long long)r.state.value("step", int64_t(0)),
              r.state.value("files", nlohmann::json::object()).size());
}

}  // namespace tr::app
