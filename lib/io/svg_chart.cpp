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
  if (a >= 1e5 || a < 1e-3) std::snprintf(b, sizeof b, "%.3g", v);
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
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string render_svg(const Chart& c, int width, int height) {
  const double ml = 64, mr = 16, mt = 28, mb = 44;  // margins: tick labels left, title top, axis label below
  const double pw = width - ml - mr, ph = height - mt - mb;
  auto fy = [&](double v) { return c.log_y ? std::log10(v) : v; };
  auto usable = [&](double v) { return std::isfinite(v) && (!c.log_y || v > 0); };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !usable(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, fy(s.y[i]));
      y1 = std::max(y1, fy(s.y[i]));
    }
  const bool empty = !(x1 >= x0);
  if (empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) {
    const double d = y0 == 0 ? 1 : std::fabs(y0) * 0.1;
    y0 -= d, y1 += d;
  }
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return ml + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return mt + ph - (fy(y) - y0) / (y1 - y0) * ph; };
  auto py_raw = [&](double t) { return mt + ph - (t - y0) / (y1 - y0) * ph; };

  std::string s = str("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", height,
                       "\" viewBox=\"0 0 ", width, " ", height, "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  s += str("<rect width=\"", width, "\" height=\"", height, "\" fill=\"white\"/>\n");
  s += str("<text x=\"", num(ml + pw / 2), "\" y=\"17\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">",
           esc(c.title), "</text>\n");
  // grid and ticks
  const std::vector<double> xt = nice_ticks(x0, x1, 7);
  for (double v : xt) {
    if (v < x0 || v > x1) continue;
    s += str("<line x1=\"", num(px(v)), "\" y1=\"", num(mt), "\" x2=\"", num(px(v)), "\" y2=\"", num(mt + ph),
             "\" stroke=\"#e6e6e6\"/>\n");
    s += str("<text x=\"", num(px(v)), "\" y=\"", num(mt + ph + 14), "\" text-anchor=\"middle\">",
             tick_label(v, xt.size() > 1 ? xt[1] - xt[0] : 1), "</text>\n");
  }
  std::vector<double> yt;
  if (c.log_y) {
    for (double e = std::floor(y0); e <= std::ceil(y1); e += 1) yt.push_back(e);
  } else {
    yt = nice_ticks(y0, y1, 6);
  }
  for (double t : yt) {
    if (t < y0 || t > y1) continue;
    const double y = py_raw(t);
    s += str("<line x1=\"", num(ml), "\" y1=\"", num(y), "\" x2=\"", num(ml + pw), "\" y2=\"", num(y),
             "\" stroke=\"#e6e6e6\"/>\n");
    const std::string label = c.log_y ? tick_label(std::pow(10.0, t), std::pow(10.0, t))
                                      : tick_label(t, yt.size() > 1 ? yt[1] - yt[0] : 1);
    s += str("<text x=\"", num(ml - 6), "\" y=\"", num(y + 4), "\" text-anchor=\"end\">", label, "</text>\n");
  }
  s += str("<rect x=\"", num(ml), "\" y=\"", num(mt), "\" width=\"", num(pw), "\" height=\"", num(ph),
           "\" fill=\"none\" stroke=\"#444\"/>\n");
  s += str("<text x=\"", num(ml + pw / 2), "\" y=\"", height - 8, "\" text-anchor=\"middle\">", esc(c.x_label),
           "</text>\n");
  s += str("<text x=\"14\" y=\"", num(mt + ph / 2), "\" text-anchor=\"middle\" transform=\"rotate(-90 14 ",
           num(mt + ph / 2), ")\">", esc(c.y_label), "</text>\n");
  if (empty)
    s += str("<text x=\"", num(ml + pw / 2), "\" y=\"", num(mt + ph / 2), "\" text-anchor=\"middle\" fill=\"#888\">",
             "no data</text>\n");
  // the series: one polyline per unbroken run of usable points
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& se = c.series[k];
    const char* color = kPalette[size_t(se.color >= 0 ? se.color : int(k)) % 10];
    std::string pts;
    auto flush = [&] {
      if (pts.empty()) return;
      s += str("<polyline fill=\"none\" stroke=\"", color, "\" stroke-width=\"1.6\"",
               se.dashed ? " stroke-dasharray=\"5,3\"" : "", " points=\"", pts, "\"/>\n");
      pts.clear();
    };
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !usable(se.y[i])) {
        flush();
        continue;
      }
      pts += str(pts.empty() ? "" : " ", num(px(se.x[i])), ",", num(py(se.y[i])));
      if (se.markers)
        s += str("<circle cx=\"", num(px(se.x[i])), "\" cy=\"", num(py(se.y[i])), "\" r=\"2.5\" fill=\"", color, "\"/>\n");
    }
    flush();
  }
  // legend, top right inside the plot
  double ly = mt + 14;
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& se = c.series[k];
    const char* color = kPalette[size_t(se.color >= 0 ? se.color : int(k)) % 10];
    const double lx = ml + pw - 150;
    s += str("<line x1=\"", num(lx), "\" y1=\"", num(ly - 4), "\" x2=\"", num(lx + 18), "\" y2=\"", num(ly - 4),
             "\" stroke=\"", color, "\" stroke-width=\"2\"", se.dashed ? " stroke-dasharray=\"5,3\"" : "", "/>\n");
    s += str("<text x=\"", num(lx + 22), "\" y=\"", num(ly), "\">", esc(se.label), "</text>\n");
    ly += 14;
  }
  return s + "</svg>\n";
}

std::string render_html(const std::string& title, const std::string& notes, const std::vector<Chart>& charts) {
  std::string h = str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", esc(title),
                      "</title>\n<style>body{font-family:sans-serif;margin:16px;background:#fafafa}"
                      ".grid{display:flex;flex-wrap:wrap;gap:12px}.grid svg{border:1px solid #ddd}"
                      "p{color:#555;font-size:13px}</style></head>\n<body>\n<h2>", esc(title), "</h2>\n<p>", esc(notes),
                      "</p>\n<div class=\"grid\">\n");
  for (const Chart& c : charts) h += render_svg(c);
  return h + "</div>\n</body></html>\n";
}

}  // namespace tr::io
