#include "app/commands.h"

namespace tr::app {

Commands::Commands(CLI::App& app) {
  run.add_to(app);
  eval.add_to(app);
  summary.add_to(app);
  checkpoint_verify.add_to(app);
  export_.add_to(app);
  list.add_to(app);
  plot.add_to(app);
  plan.add_to(app);
  pack.add_to(app);
  info.add_to(app);
  sample.add_to(app);
}

}  // namespace tr::app
