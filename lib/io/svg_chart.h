// Line charts as SVG, and pages of them as one self-contained HTML file (no script, no network, no
// font files): what `trainer plot` draws from runs' metrics.jsonl and `trainer plan` from a config's
// LR schedule. Axes with round ticks, a legend, one colour per series; NaN and inf points break
// a line instead of bending it.
#pragma once
#include <string>
#include <vector>

namespace tr::io {

struct Series {
  std::string label;
  std::vector<double> x, y;
  bool dashed = false;
  int color = -1;        // an index into the palette; -1: the series' position in the chart
  bool markers = false;  // a dot at each point (sparse series, e.g. one eval per epoch)
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;  // a log10 axis (values <= 0 are left out)
};

// One chart, width x height pixels.
std::string render_svg(const Chart& c, int width = 640, int height = 360);
// A page: a heading, a line of notes, then the charts two a row.
std::string render_html(const std::string& title, const std::string& notes, const std::vector<Chart>& charts);

// "Nice" tick values covering [lo, hi] (about `n` of them: steps of 1, 2 or 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int n = 6);

}  // namespace tr::io
