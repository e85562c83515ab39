#include "io/svg_chart.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include "core/error.h"

namespace tr::io {

namespace {

// Tableau's ten colours (matplotlib's default cycle)
const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string esc(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '&': r += "&amp;"; break;
      case '"': r += "&quot;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A tick's label: as short as the tick step allows (0.001, 2.5e-05, 1200, 1e+06)
std::string tick_label(double v, double step) {
  char b[32];
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e5 || a < 1e-3)
    std::snprintf(b, sizeof b, "%.3g", v);
  else {
    const int decimals = std::max(0, int(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(b, sizeof b, "%.*f", std::min(decimals, 6), v);
  }
  return b;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(n - 1, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

namespace {

// Where a chart's points land: the plot area inside the margins and the data range it spans
// (y in plotted units: log10 of the values on a log axis).
struct PlotArea {
  static constexpr double ml = 64, mr = 16, mt = 28, mb = 44;  // margins: tick labels left, title top, axis label below
  double pw, ph;
  bool log_y;
  double x0, x1, y0, y1;
  bool empty;  // no usable point: the range is [0, 1] x [0, 1]

  double fy(double v) const { return log_y ? std::log10(v) : v; }
  bool usable(double v) const { return std::isfinite(v) && (!log_y || v > 0); }
  double px(double x) const { return ml + (x - x0) / (x1 - x0) * pw; }
  double py(double y) const { return mt + ph - (fy(y) - y0) / (y1 - y0) * ph; }
  double py_raw(double t) const { return mt + ph - (t - y0) / (y1 - y0) * ph; }
};

// The range of the usable points, widened when flat and padded by 5% in y.
PlotArea plot_area(const Chart& c, int width, int height) {
  PlotArea a{width - PlotArea::ml - PlotArea::mr, height - PlotArea::mt - PlotArea::mb, c.log_y, 0, 0, 0, 0, false};
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !a.usable(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, a.fy(s.y[i]));
      y1 = std::max(y1, a.fy(s.y[i]));
    }
  a.empty = !(x1 >= x0);
  if (a.empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) {
    const double d = y0 == 0 ? 1 : std::fabs(y0) * 0.1;
    y0 -= d, y1 += d;
  }
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  a.x0 = x0, a.x1 = x1, a.y0 = y0, a.y1 = y1;
  return a;
}

void draw_x_grid(std::string& s, const PlotArea& a) {
  const std::vector<double> xt = nice_ticks(a.x0, a.x1, 7);
  for (double v : xt) {
    if (v < a.x0 || v > a.x1) continue;
    s += str("<line x1=\"", num(a.px(v)), "\" y1=\"", num(a.mt), "\" x2=\"", num(a.px(v)), "\" y2=\"", num(a.mt + a.ph),
             "\" stroke=\"#e6e6e6\"/>\n");
    s += str("<text x=\"", num(a.px(v)), "\" y=\"", num(a.mt + a.ph + 14), "\" text-anchor=\"middle\">",
             tick_label(v, xt.size() > 1 ? xt[1] - xt[0] : 1), "</text>\n");
  }
}

// Round ticks, or on a log axis one per power of ten.
void draw_y_grid(std::string& s, const PlotArea& a) {
  std::vector<double> yt;
  if (a.log_y) {
    for (double e = std::floor(a.y0); e <= std::ceil(a.y1); e += 1) yt.push_back(e);
  } else {
    yt = nice_ticks(a.y0, a.y1, 6);
  }
  for (double t : yt) {
    if (t < a.y0 || t > a.y1) continue;
    const double y = a.py_raw(t);
    s += str("<line x1=\"", num(a.ml), "\" y1=\"", num(y), "\" x2=\"", num(a.ml + a.pw), "\" y2=\"", num(y),
             "\" stroke=\"#e6e6e6\"/>\n");
    const std::string label =
        a.log_y ? tick_label(std::pow(10.0, t), std::pow(10.0, t)) : tick_label(t, yt.size() > 1 ? yt[1] - yt[0] : 1);
    s += str("<text x=\"", num(a.ml - 6), "\" y=\"", num(y + 4), "\" text-anchor=\"end\">", label, "</text>\n");
  }
}

void draw_frame_and_labels(std::string& s, const Chart& c, const PlotArea& a, int height) {
  s += str("<rect x=\"", num(a.ml), "\" y=\"", num(a.mt), "\" width=\"", num(a.pw), "\" height=\"", num(a.ph),
           "\" fill=\"none\" stroke=\"#444\"/>\n");
  s += str("<text x=\"", num(a.ml + a.pw / 2), "\" y=\"", height - 8, "\" text-anchor=\"middle\">", esc(c.x_label),
           "</text>\n");
  s += str("<text x=\"14\" y=\"", num(a.mt + a.ph / 2), "\" text-anchor=\"middle\" transform=\"rotate(-90 14 ",
           num(a.mt + a.ph / 2), ")\">", esc(c.y_label), "</text>\n");
  if (a.empty)
    s += str("<text x=\"", num(a.ml + a.pw / 2), "\" y=\"", num(a.mt + a.ph / 2),
             "\" text-anchor=\"middle\" fill=\"#888\">", "no data</text>\n");
}

const char* color_of(const Series& se, size_t k) { return kPalette[size_t(se.color >= 0 ? se.color : int(k)) % 10]; }

// One polyline per unbroken run of usable points.
void draw_series(std::string& s, const Series& se, const char* color, const PlotArea& a) {
  std::string pts;
  auto flush = [&] {
    if (pts.empty()) return;
    s += str("<polyline fill=\"none\" stroke=\"", color, "\" stroke-width=\"1.6\"",
             se.dashed ? " stroke-dasharray=\"5,3\"" : "", " points=\"", pts, "\"/>\n");
    pts.clear();
  };
  for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
    if (!std::isfinite(se.x[i]) || !a.usable(se.y[i])) {
      flush();
      continue;
    }
    pts += str(pts.empty() ? "" : " ", num(a.px(se.x[i])), ",", num(a.py(se.y[i])));
    if (se.markers)
      s += str("<circle cx=\"", num(a.px(se.x[i])), "\" cy=\"", num(a.py(se.y[i])), "\" r=\"2.5\" fill=\"", color,
               "\"/>\n");
  }
  flush();
}

// Top right inside the plot.
void draw_legend(std::string& s, const Chart& c, const PlotArea& a) {
  double ly = a.mt + 14;
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& se = c.series[k];
    const char* color = color_of(se, k);
    const double lx = a.ml + a.pw - 150;
    s += str("<line x1=\"", num(lx), "\" y1=\"", num(ly - 4), "\" x2=\"", num(lx + 18), "\" y2=\"", num(ly - 4),
             "\" stroke=\"", color, "\" stroke-width=\"2\"", se.dashed ? " stroke-dasharray=\"5,3\"" : "", "/>\n");
    s += str("<text x=\"", num(lx + 22), "\" y=\"", num(ly), "\">", esc(se.label), "</text>\n");
    ly += 14;
  }
}

}  // namespace

std::string render_svg(const Chart& c, int width, int height) {
  const PlotArea a = plot_area(c, width, height);
  std::string s = str("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", height,
                      "\" viewBox=\"0 0 ", width, " ", height, "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  s += str("<rect width=\"", width, "\" height=\"", height, "\" fill=\"white\"/>\n");
  s += str("<text x=\"", num(a.ml + a.pw / 2),
           "\" y=\"17\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">", esc(c.title), "</text>\n");
  draw_x_grid(s, a);
  draw_y_grid(s, a);
  draw_frame_and_labels(s, c, a, height);
  for (size_t k = 0; k < c.series.size(); ++k) draw_series(s, c.series[k], color_of(c.series[k], k), a);
  draw_legend(s, c, a);
  return s + "</svg>\n";
}

std::string render_html(const std::string& title, const std::string& notes, const std::vector<Chart>& charts) {
  std::string h = str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", esc(title),
                      "</title>\n<style>body{font-family:sans-serif;margin:16px;background:#fafafa}"
                      ".grid{display:flex;flex-wrap:wrap;gap:12px}.grid svg{border:1px solid #ddd}"
                      "p{color:#555;font-size:13px}</style></head>\n<body>\n<h2>",
                      esc(title), "</h2>\n<p>", esc(notes), "</p>\n<div class=\"grid\">\n");
  for (const Chart& c : charts) h += render_svg(c);
  return h + "</div>\n</body></html>\n";
}

}  // namespace tr::io
