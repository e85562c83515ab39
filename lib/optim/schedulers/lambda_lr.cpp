// LambdaLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "lambda".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/lambda_lr.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

LambdaLR::LambdaLR(Optimizer& opt, const std::vector<std::string>& lambdas, LambdaContext ctx) : LRScheduler(opt) {
  TR_CHECK(lambdas.size() == 1 || lambdas.size() == num_groups(), "LambdaLR: expected ", num_groups(),
           " lr_lambdas (one per param group) or one for all, got ", lambdas.size());
  for (size_t g = 0; g < num_groups(); ++g) {
    const std::string& e = lambdas.size() == 1 ? lambdas[0] : lambdas[g];
    std::string what = lambdas.size() == 1
                           ? std::string("LambdaLR: lambda")
                           : str("LambdaLR: lambda for param group ", g, " ('", opt.param_groups()[g].name, "')");
    fns_.push_back({std::make_shared<LambdaExpr>(e, what), {}});
  }
  set_context(ctx);
  initial_step();
}

LambdaLR::LambdaLR(Optimizer& opt, std::vector<std::function<double(int64_t)>> lambdas) : LRScheduler(opt) {
  TR_CHECK(lambdas.size() == 1 || lambdas.size() == num_groups(), "LambdaLR: expected ", num_groups(),
           " lr_lambdas (one per param group) or one for all, got ", lambdas.size());
  for (size_t g = 0; g < num_groups(); ++g) fns_.push_back({nullptr, lambdas.size() == 1 ? lambdas[0] : lambdas[g]});
  initial_step();
}

void LambdaLR::set_context(const LambdaContext& ctx) {
  LRScheduler::set_interval(ctx.interval);
  TR_CHECK(ctx.steps_per_epoch >= 1, "LambdaLR: steps_per_epoch must be >= 1, got ", ctx.steps_per_epoch);
  ctx_ = ctx;
}

void LambdaLR::set_interval(const std::string& interval) {
  LRScheduler::set_interval(interval);
  ctx_.interval = interval;
}

LambdaVars LambdaLR::variables(size_t g, int64_t e) const {
  LambdaVars v;
  v.last_epoch = static_cast<double>(e);
  if (ctx_.interval == "step") {
    v.step = static_cast<double>(e);
    v.epoch = static_cast<double>(py_floordiv(e, ctx_.steps_per_epoch));
  } else {
    v.epoch = static_cast<double>(e);
    v.step = static_cast<double>(e * ctx_.steps_per_epoch);
  }
  v.base_lr = base_lrs_[g];
  v.total_steps = static_cast<double>(ctx_.total_steps);
  v.total_epochs = static_cast<double>(ctx_.total_epochs);
  v.steps_per_epoch = static_cast<double>(ctx_.steps_per_epoch);
  v.warmup_steps = static_cast<double>(ctx_.warmup_steps);
  return v;
}

double LambdaLR::factor(size_t g, int64_t e) const {
  const Fn& f = fns_[g];
  if (!f.expr) return f.fn(e);
  LambdaVars v = variables(g, e);
  double r = (*f.expr)(v);
  TR_CHECK(std::isfinite(r), "LambdaLR: the lambda of param group ", g, " ('", f.expr->expr(), "') is ", r,
           " at last_epoch=", e, " (step=", v.step, ", epoch=", v.epoch, ", total_steps=", v.total_steps,
           ", warmup_steps=", v.warmup_steps, ")");
  return r;
}

// base_lr * lmbda(last_epoch)
std::vector<double> LambdaLR::get_lr() {
  std::vector<double> r;
  for (size_t g = 0; g < num_groups(); ++g) r.push_back(base_lrs_[g] * factor(g, last_epoch_));
  return r;
}

json LambdaLR::state_dict() const {
  json s = LRScheduler::state_dict();
  json l = json::array();
  for (const auto& f : fns_) l.push_back(f.expr ? json(f.expr->expr()) : json(nullptr));
  s["lr_lambdas"] = l;
  return s;
}

namespace {

std::unique_ptr<LRScheduler> build_lambda_lr(const TomlTable& t, const SchedulerBuild& b) {
  std::vector<std::string> exprs = t.get_strings("lambda");
  const size_t groups = b.opt.param_groups().size();
  if (exprs.size() != 1 && exprs.size() != groups)
    t.fail("lambda", str("has ", exprs.size(), " expressions; expected one, or one per param group (", groups, ")"));
  // Parse each here so that an error points at its own string in the file.
  const toml::node* n = t.node("lambda");
  for (size_t i = 0; i < exprs.size(); ++i) {
    const toml::node* e = n->is_array() ? n->as_array()->get(i) : n;
    std::string what = exprs.size() == 1 ? str(toml_location(*e, t.file()), ": ", t.what(), ": lambda")
                                         : str(toml_location(*e, t.file()), ": ", t.what(), ": lambda for param group ",
                                               i, " ('", b.opt.param_groups()[i].name, "')");
    LambdaExpr check(exprs[i], what);
  }
  LambdaContext lc;
  lc.interval = b.interval;
  lc.steps_per_epoch = std::max<int64_t>(1, b.run.steps_per_epoch);
  lc.total_steps = b.run.total_steps;
  lc.total_epochs = b.run.epochs;
  lc.warmup_steps = t.get_int("warmup_steps", b.run.warmup_steps);
  return located(t, [&] { return std::make_unique<LambdaLR>(b.opt, exprs, lc); });
}

}  // namespace

TR_REGISTER_SCHEDULER(
    "lambda",
    {build_lambda_lr,
     "lambda = \"0.95^epoch\" (or one per param group; variables step, epoch, last_epoch, base_lr, total_steps, "
     "total_epochs, steps_per_epoch, warmup_steps; helpers warmup(), cosine()), warmup_steps = 0"});

}  // namespace tr::optim
