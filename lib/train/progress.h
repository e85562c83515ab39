// Progress of a training run: the window statistics between log points (what train lines report)
// and what the user sees — a live line rewritten in place on a terminal, or plain periodic
// lines when stdout is not one ([log] progress = auto | lines | none).
#pragma once
#include <nlohmann/json.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace tr::train {

// The sums of the steps since the last train line, saved in checkpoints so that the first train
// line after a resume equals the uninterrupted run's.
struct ProgressWindow {
  double loss_sum = 0, norm_sum = 0;
  int64_t samples = 0, steps = 0, norms = 0;
};

// A JSON number as metrics.jsonl writes it (%.9g; NaN and infinities as JSON5 words).
std::string json_num(double v);
// "mm:ss" or "h:mm:ss".
std::string fmt_duration(double seconds);

// A loss and, for a classification loss, an accuracy.
struct EvalScores {
  double loss = 0;
  std::optional<double> accuracy;
};

// What a train line reports of the window of steps it closes.
struct WindowSummary {
  double loss = 0;                  // the mean of its steps' losses
  std::optional<double> grad_norm;  // the mean of its gradient norms, where the steps had one
  double samples_per_s = 0;
};

class Progress {
 public:
  // progress: "auto" | "lines" | "none"; total_steps for the ETA; log_every in optimizer steps.
  Progress(const std::string& progress, int64_t total_steps, int64_t log_every, int64_t first_step = 0);

  // One optimizer step done: its loss, samples it consumed, and its total gradient norm (< 0: none).
  void step(int64_t step, int64_t epoch, double loss, int64_t samples, double grad_norm);
  // The figures of the window ending now, for a train line (call when log_due(step)); opens the next window.
  WindowSummary close_window();
  bool log_due(int64_t step) const { return step % log_every_ == 0 || step == total_steps_; }
  // Prints what the mode shows for this step (the live line every 5 steps or when `refresh`, or a
  // plain line when a log is due); call before close_window.
  void show(int64_t step, int64_t epoch, const std::vector<double>& lrs, bool refresh = false);
  bool live() const { return live_ && !quiet_; }
  // Optimizer steps per second in the open window; and leaving time spent on other work (e.g.
  // measuring the matmul peak) out of it.
  double steps_per_s() const;
  void exclude_from_window(std::chrono::steady_clock::duration d) { window_t0_ += d; }
  // An eval result line for the console (ends a live line first); accuracy where the loss has one,
  // and the EMA weights' scores when the run keeps them.
  void eval(int64_t step, int64_t epoch, double loss, std::optional<double> accuracy,
            std::optional<EvalScores> ema = std::nullopt);
  void message(const std::string& text);  // a line for the console unless quiet
  bool quiet() const { return quiet_; }
  // The open window's sums (checkpointed).
  ProgressWindow window_state() const { return window_; }
  void restore_window(const ProgressWindow& w) { window_ = w; }

 private:
  double window_seconds() const;
  double eta(int64_t step) const;

  bool live_ = false, quiet_ = false, line_open_ = false;
  int64_t total_steps_, log_every_, first_step_;
  std::chrono::steady_clock::time_point t0_, window_t0_;
  ProgressWindow window_;  // since the last log point
};

}  // namespace tr::train
