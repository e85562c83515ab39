// LambdaExpr: a LambdaLR factor written as a muparser expression ("0.95^epoch",
// "warmup(step, warmup_steps) * cosine(step, total_steps)") instead of a Python lambda.
//
// Variables (set for each evaluation by LambdaLR, see LambdaVars):
//   step, epoch, last_epoch, base_lr, total_steps, total_epochs, steps_per_epoch, warmup_steps
// Functions, besides muparser's built-ins (sin cos tan exp ln = log (base e) log2 log10 sqrt abs sign
// rint min max sum avg ..., `^` power (right-associative, -2^2 = -4), comparisons, `c ? a : b`):
//   warmup(s, w)  = w <= 0 ? 1 : min(1, (s + 1) / w)
//                   linear warmup: the first step (s = 0) runs at 1/w of the lr, step w-1 and later
//                   at the full lr.
//   cosine(s, T)  = 0.5 * (1 + cos(pi * min(s, T) / T))
//                   half a cosine from 1 (s = 0) to 0 (s >= T); NaN when T <= 0 (reported by LambdaLR).
//   floor(x), ceil(x)
// Constants: pi (= _pi; both the double nearest pi), _e.
// Python's `**` is not an operator here: use `^`.
// Evaluated as written (muparser's bytecode optimizer is off): an expression gives the bits of the
// Python lambda with the same operations in the same order, e.g. `(step+1)/5` those of `(s+1)/5`.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace tr::optim {

struct LambdaVars {
  double step = 0;
  double epoch = 0;
  double last_epoch = 0;
  double base_lr = 0;
  double total_steps = 0;
  double total_epochs = 0;
  double steps_per_epoch = 1;
  double warmup_steps = 0;
};

class LambdaExpr {
 public:
  // Parses `expr` now. A syntax error or an unknown name throws an Error that starts with `what`
  // ("lambda for param group 0") and gives the 0-based character position with a caret line.
  LambdaExpr(const std::string& expr, const std::string& what);
  ~LambdaExpr();
  LambdaExpr(LambdaExpr&&) noexcept;
  LambdaExpr& operator=(LambdaExpr&&) noexcept;

  // The factor for these variable values. Not thread-safe (the parser's variables live in the
  // object), which is fine: a scheduler is stepped by one thread.
  double operator()(const LambdaVars& v) const;
  const std::string& expr() const;

  // The names an expression may use (for messages and docs).
  static const std::vector<std::string>& variable_names();
  static const std::vector<std::string>& function_names();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // on the heap: the parser holds pointers to the variables
};

}  // namespace tr::optim
