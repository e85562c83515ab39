#include "train/progress.h"
#include <unistd.h>
#include <cmath>
#include "core/error.h"

namespace tr::train {

std::string json_num(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace {
std::string fixed4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}
}  // namespace

std::string fmt_duration(double s) {
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                  (long long)(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

Progress::Progress(const std::string& progress, int64_t total_steps, int64_t log_every, int64_t first_step)
    : total_steps_(total_steps), log_every_(log_every), first_step_(first_step) {
  live_ = progress == "auto" && isatty(fileno(stdout));
  quiet_ = progress == "none";
  t0_ = window_t0_ = std::chrono::steady_clock::now();
}

double Progress::window_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - window_t0_).count();
}

double Progress::eta(int64_t step) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  int64_t done = step - first_step_;
  return done > 0 ? elapsed / double(done) * double(total_steps_ - step) : 0.0;
}

void Progress::step(int64_t, int64_t, double loss, int64_t samples, double grad_norm) {
  window_.loss_sum += loss;
  window_.samples += samples;
  ++window_.steps;
  if (grad_norm >= 0 || std::isnan(grad_norm)) {
    window_.norm_sum += grad_norm;
    ++window_.norms;
  }
}

double Progress::steps_per_s() const {
  const double w = window_seconds();
  return w > 0 ? double(window_.steps) / w : 0.0;
}

WindowSummary Progress::close_window() {
  const double w = window_seconds();
  WindowSummary s;
  s.loss = window_.loss_sum / double(std::max<int64_t>(window_.steps, 1));
  if (window_.norms > 0) s.grad_norm = window_.norm_sum / double(window_.norms);
  s.samples_per_s = w > 0 ? double(window_.samples) / w : 0.0;
  window_ = {};
  window_t0_ = std::chrono::steady_clock::now();
  return s;
}

void Progress::show(int64_t step, int64_t epoch, const std::vector<double>& lrs, bool refresh) {
  if (quiet_) return;
  bool due = log_due(step);
  if (!(live_ ? (step % 5 == 0 || due || refresh) : due)) return;
  double w = window_seconds();
  double sps = w > 0 ? double(window_.samples) / w : 0.0;
  double loss = window_.loss_sum / double(std::max<int64_t>(window_.steps, 1));
  std::printf("%sepoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f samples/s  ETA %s%s", live_ ? "\r" : "",
              (long long)epoch, (long long)step, (long long)total_steps_, loss, lrs.empty() ? 0.0 : lrs[0], sps,
              fmt_duration(eta(step)).c_str(), live_ ? "   " : "\n");
  line_open_ = live_;
  std::fflush(stdout);
}

void Progress::eval(int64_t step, int64_t epoch, double loss, std::optional<double> accuracy,
                    std::optional<EvalScores> ema) {
  if (quiet_) return;
  std::string line = str("eval  step ", step, "  epoch ", epoch, "  loss ", fixed4(loss));
  if (accuracy) line += "  accuracy " + fixed4(*accuracy);
  if (ema) {
    line += "  |  EMA loss " + fixed4(ema->loss);
    if (ema->accuracy) line += "  accuracy " + fixed4(*ema->accuracy);
  }
  message(line);
}

void Progress::message(const std::string& text) {
  if (quiet_) return;
  if (line_open_) std::printf("\n");
  line_open_ = false;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace tr::train
