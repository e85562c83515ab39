// `trainer eval CONFIG --checkpoint DIR`: the eval split's loss (and accuracy) of saved weights, as
// one JSON line (numbers as metrics.jsonl writes them).
#include <cstdio>
#include "app/commands.h"
#include "core/error.h"
#include "config/run_config.h"
#include "train/progress.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace tr::app {

void EvalCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("eval", "evaluate saved weights with a run config");
  config.add_file(*c);
  add_checkpoint_option(*c, checkpoint);
  config.add_overrides(*c);
  c->add_flag("--ema", ema, "evaluate the checkpoint directory's EMA weights (ema.safetensors)");
  c->callback([this] { execute(); });
}

void EvalCommand::execute() const {
  config::RunConfig c = config.load();
  c.log.progress = "none";
  train::Trainer t(c);
  t.load_weights(train::weights_file(checkpoint, ema));
  train::EvalResult r = t.evaluate();
  std::string accuracy = r.accuracy ? str(",\"accuracy\":", train::json_num(*r.accuracy)) : "";
  std::printf("{\"split\":\"eval\",\"loss\":%s%s,\"count\":%lld}\n", train::json_num(r.loss).c_str(), accuracy.c_str(),
              (long long)r.count);
}

}  // namespace tr::app
