// `trainer plot`: the curves of one or several runs from their metrics.jsonl, as the charts of
// io/svg_chart.h: train loss, eval loss, eval accuracy (where the runs have one) and every param
// group's learning rate, against the optimizer step; one colour per run.
#pragma once
#include <string>
#include <vector>
#include "io/svg_chart.h"

namespace tr::io {

// The charts of the runs in `run_dirs` (each holding metrics.jsonl; a missing or unreadable one is
// an Error naming it). A run is labelled with its directory's name.
std::vector<Chart> run_charts(const std::vector<std::string>& run_dirs);

// The charts written to `out`: an HTML page (.html) or one SVG (.svg) with the charts two a row.
void write_plot(const std::string& out, const std::string& title, const std::string& notes,
                const std::vector<Chart>& charts);

}  // namespace tr::io
