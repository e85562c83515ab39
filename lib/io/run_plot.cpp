#include "io/run_plot.h"
#include <filesystem>
#include <fstream>
#include "core/error.h"
#include "io/metrics_sink.h"

namespace tr::io {

namespace fs = std::filesystem;

std::vector<Chart> run_charts(const std::vector<std::string>& run_dirs) {
  Chart train{"train loss", "step", "loss", {}, false}, eval{"eval loss", "step", "loss", {}, false},
      acc{"eval accuracy", "step", "accuracy", {}, false}, lr{"learning rate", "step", "lr", {}, false};
  for (size_t k = 0; k < run_dirs.size(); ++k) {
    const fs::path dir = run_dirs[k];
    const std::string file = (dir / "metrics.jsonl").string();
    std::ifstream in(file);
    TR_CHECK(in, "trainer plot: cannot read ", file, " (a run directory holds metrics.jsonl)");
    std::string name = dir.filename().string();
    if (name.empty()) name = dir.parent_path().filename().string();
    const int color = int(k);
    Series tl{name, {}, {}, false, color}, el{name, {}, {}, false, color, true}, ea{name, {}, {}, false, color, true};
    std::vector<Series> lrs;
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      nlohmann::json r;
      try {
        r = parse_metrics_record(line);
      } catch (const std::exception& e) {
        throw Error(str("trainer plot: ", file, ":", n, ": not a metrics record: ", e.what()));
      }
      const double step = metrics_number(r.value("step", nlohmann::json()));
      if (r.value("split", "") == "train") {
        tl.x.push_back(step);
        tl.y.push_back(metrics_number(r.value("loss", nlohmann::json())));
        if (r.contains("lr") && r["lr"].is_array()) {
          const auto& a = r["lr"];
          for (size_t g = lrs.size(); g < a.size(); ++g)
            lrs.push_back(Series{a.size() > 1 ? str(name, " group ", g) : name, {}, {}, g > 0, color});
          for (size_t g = 0; g < a.size(); ++g) {
            lrs[g].x.push_back(step);
            lrs[g].y.push_back(metrics_number(a[g]));
          }
        }
      } else if (r.value("split", "") == "eval") {
        el.x.push_back(step);
        el.y.push_back(metrics_number(r.value("loss", nlohmann::json())));
        if (r.contains("accuracy")) {
          ea.x.push_back(step);
          ea.y.push_back(metrics_number(r["accuracy"]));
        }
      }
    }
    train.series.push_back(tl);
    eval.series.push_back(el);
    if (!ea.x.empty()) acc.series.push_back(ea);
    for (auto& s : lrs) lr.series.push_back(s);
  }
  std::vector<Chart> charts{train, eval};
  if (!acc.series.empty()) charts.push_back(acc);
  charts.push_back(lr);
  return charts;
}

void write_plot(const std::string& out, const std::string& title, const std::string& notes,
                const std::vector<Chart>& charts) {
  std::string text;
  if (fs::path(out).extension() == ".svg") {
    const int w = 640, h = 360, cols = 2;
    const int rows = int((charts.size() + cols - 1) / cols);
    text = str("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", w * cols, "\" height=\"", h * rows, "\">\n");
    for (size_t i = 0; i < charts.size(); ++i) {
      std::string one = render_svg(charts[i], w, h);
      // place it: the nested svg's own x, y
      one.insert(4, str(" x=\"", int(i % cols) * w, "\" y=\"", int(i / cols) * h, "\""));
      text += one;
    }
    text += "</svg>\n";
  } else {
    text = render_html(title, notes, charts);
  }
  std::ofstream f(out, std::ios::binary);
  TR_CHECK(f, "cannot write ", out);
  f << text;
  TR_CHECK(f.good(), "cannot write ", out);
}

}  // namespace tr::io
