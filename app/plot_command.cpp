// `trainer plot RUN...`: runs' loss, accuracy and lr curves in one HTML (or SVG) file.
#include <cstdio>
#include "app/commands.h"
#include "core/error.h"
#include "io/run_plot.h"

namespace tr::app {

void PlotCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("plot", "draw runs' loss, accuracy and lr curves into one HTML (or SVG) file");
  c->add_option("runs", runs, "run directories (runs/<name>, each with metrics.jsonl)")->required();
  c->add_option("-o,--out", out, "output file: .html (a page, default plot.html) or .svg");
  c->callback([this] { execute(); });
}

void PlotCommand::execute() const {
  const auto charts = io::run_charts(runs);
  io::write_plot(out, "trainer runs", str(runs.size(), " run(s): ", runs), charts);
  std::printf("wrote %s (%zu charts of %zu run(s))\n", out.c_str(), charts.size(), runs.size());
}

}  // namespace tr::app
