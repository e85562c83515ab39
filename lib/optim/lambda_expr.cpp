#include "optim/lambda_expr.h"
#include <muParser.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <numbers>
#include <regex>
#include "core/error.h"
#include "toml/toml_table.h"  // nearest_name

namespace tr::optim {

namespace {

// min(1, (s + 1) / w): step s is the (s+1)-th optimizer step, so step w-1 reaches the full lr.
double warmup_fn(double s, double w) { return w <= 0 ? 1.0 : std::min(1.0, (s + 1) / w); }

// 0.5 * (1 + cos(pi * min(s, T) / T)); T <= 0 has no meaning: NaN, which LambdaLR reports.
double cosine_fn(double s, double total) {
  if (!(total > 0)) return std::nan("");
  return 0.5 * (1 + std::cos(std::numbers::pi * std::min(s, total) / total));
}

double floor_fn(double x) { return std::floor(x); }
double ceil_fn(double x) { return std::ceil(x); }

// muparser's messages end in "... found at position 5." / "... at position 7"; the position is
// reported separately with a caret.
std::string strip_position(std::string msg) {
  static const std::regex tail(R"(\s*(found\s+)?at position -?\d+\.?\s*$)");
  return std::regex_replace(msg, tail, "");
}

}  // namespace

struct LambdaExpr::Impl {
  std::string expr;
  LambdaVars vars;
  mu::Parser parser;
};

const std::vector<std::string>& LambdaExpr::variable_names() {
  static const std::vector<std::string> v = {"step",        "epoch",        "last_epoch",      "base_lr",
                                             "total_steps", "total_epochs", "steps_per_epoch", "warmup_steps"};
  return v;
}

const std::vector<std::string>& LambdaExpr::function_names() {
  static const std::vector<std::string> v = {"warmup", "cosine", "floor", "ceil"};
  return v;
}

LambdaExpr::LambdaExpr(const std::string& expr, const std::string& what) : impl_(std::make_unique<Impl>()) {
  impl_->expr = expr;
  mu::Parser& p = impl_->parser;
  LambdaVars& v = impl_->vars;
  double* slots[] = {&v.step,        &v.epoch,        &v.last_epoch,      &v.base_lr,
                     &v.total_steps, &v.total_epochs, &v.steps_per_epoch, &v.warmup_steps};
  const auto& names = variable_names();
  for (size_t i = 0; i < names.size(); ++i) p.DefineVar(names[i], slots[i]);
  p.DefineFun("warmup", warmup_fn);
  p.DefineFun("cosine", cosine_fn);
  p.DefineFun("floor", floor_fn);
  p.DefineFun("ceil", ceil_fn);
  // muparser 2.3.3's own _pi is off by ~8e-13: replace it with the double nearest pi.
  p.DefineConst("pi", std::numbers::pi);
  p.DefineConst("_pi", std::numbers::pi);
  p.DefineConst("_e", std::numbers::e);
  // No bytecode optimizer: it rewrites `(step+1)/5` into `step*0.2+0.2` (and folds other
  // constants), which rounds differently from the Python lambda the expression stands for. Off, the
  // operations run as written, each rounded once, as Python does them.
  p.EnableOptimizer(false);
  try {
    p.SetExpr(expr);
    p.Eval();  // muparser parses lazily: the first evaluation reports syntax errors and unknown names
  } catch (const mu::Parser::exception_type& e) {
    std::string msg = str(what, ": cannot parse '", expr, "': ", strip_position(e.GetMsg()));
    int pos = e.GetPos();
    if (pos >= 0) {
      pos = std::min<int>(pos, static_cast<int>(expr.size()));
      msg += str(" at position ", pos, "\n    ", expr, "\n    ", std::string(pos, ' '), "^");
    }
    if (e.GetCode() == mu::ecUNASSIGNABLE_TOKEN) {
      std::string tok = e.GetToken();
      size_t n = 0;
      while (n < tok.size() && (std::isalnum(static_cast<unsigned char>(tok[n])) || tok[n] == '_')) ++n;
      tok.resize(n);
      std::vector<std::string> known = names;
      for (const auto& [name, cb] : p.GetFunDef()) known.push_back(name);
      for (const auto& [name, val] : p.GetConst()) known.push_back(name);
      std::string near = tok.empty() ? "" : nearest_name(tok, known);
      if (!near.empty() && near != tok) msg += str("\n    did you mean '", near, "'?");
    }
    if (expr.find("**") != std::string::npos) msg += "\n    (powers are written x^y, not x**y)";
    msg += str("\n    variables: ", names,
               "; functions: warmup(step, warmup_steps), cosine(step, total_steps), "
               "floor, ceil and muparser's built-ins");
    throw Error(msg);
  }
}

LambdaExpr::~LambdaExpr() = default;
LambdaExpr::LambdaExpr(LambdaExpr&&) noexcept = default;
LambdaExpr& LambdaExpr::operator=(LambdaExpr&&) noexcept = default;

const std::string& LambdaExpr::expr() const { return impl_->expr; }

double LambdaExpr::operator()(const LambdaVars& v) const {
  impl_->vars = v;
  try {
    return impl_->parser.Eval();
  } catch (const mu::Parser::exception_type& e) { throw Error(str("lambda '", impl_->expr, "': ", e.GetMsg())); }
}

}  // namespace tr::optim
