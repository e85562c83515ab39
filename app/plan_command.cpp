// `trainer plan CONFIG`: before training, what a run will be (train/plan.h).
#include <cstdio>
#include "app/commands.h"
#include "config/run_config.h"
#include "io/run_plot.h"
#include "train/plan.h"

namespace tr::app {

void PlanCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("plan",
                               "before training: parameters per group, steps, FLOPs, memory per rank, the LR schedule");
  config.add_file(*c);
  config.add_overrides(*c);
  c->add_option("--nproc", nproc, "plan for this many data-parallel ranks")->check(CLI::PositiveNumber);
  c->add_option("-o,--out", out, "also write the LR schedule chart: .html or .svg");
  c->callback([this] { execute(); });
}

void PlanCommand::execute() const {
  train::Plan p = train::make_plan(config.load(), nproc);
  std::printf("%s", p.text.c_str());
  if (!out.empty()) {
    io::write_plot(out, "trainer plan: " + config.file, "the learning rate of every param group at every step",
                   p.charts);
    std::printf("wrote %s\n", out.c_str());
  }
}

}  // namespace tr::app
