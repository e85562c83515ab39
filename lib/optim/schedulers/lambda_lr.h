// LambdaLR: lr = base_lr * lambda(last_epoch), the lambda an expression of the run's step, epoch, ...
// (torch.optim.lr_scheduler.LambdaLR).
#pragma once
#include <functional>
#include <memory>
#include "optim/lambda_expr.h"
#include "optim/lr_scheduler.h"

namespace tr::optim {

// What LambdaLR's expression variables mean (see lambda_expr.h for the names). With e = last_epoch:
//   interval "epoch": epoch = e, step = e * steps_per_epoch (the optimizer steps before epoch e)
//   interval "step":  step = e,  epoch = floor(e / steps_per_epoch) (the epoch step e belongs to)
// last_epoch = e always (torch's lambda argument); base_lr is the group's base lr; the totals are
// the run's. Inside SequentialLR, e restarts at 0 at the child's milestone (as in torch).
struct LambdaContext {
  std::string interval = "epoch";
  int64_t steps_per_epoch = 1;
  int64_t total_steps = 0;
  int64_t total_epochs = 0;
  int64_t warmup_steps = 0;
};

class LambdaLR : public LRScheduler {
 public:
  // One expression for all groups or one per group; each is parsed here (errors name the group).
  LambdaLR(Optimizer& opt, const std::vector<std::string>& lambdas, LambdaContext ctx = {});
  // C++ callables of last_epoch (torch's Python lambdas); state_dict stores null for them.
  LambdaLR(Optimizer& opt, std::vector<std::function<double(int64_t)>> lambdas);
  std::string type_name() const override { return "LambdaLR"; }

  // Takes effect from the next step.
  void set_context(const LambdaContext& ctx);
  const LambdaContext& context() const { return ctx_; }
  void set_interval(const std::string& interval) override;
  // The variables the expression of group `g` sees at last_epoch `e`.
  LambdaVars variables(size_t g, int64_t e) const;

  // lr_lambdas: the expressions (null for C++ callables). As torch, loading keeps this
  // scheduler's lambdas.
  nlohmann::json state_dict() const override;

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Fn {  // an expression, or else a C++ callable
    std::shared_ptr<LambdaExpr> expr;
    std::function<double(int64_t)> fn;
  };
  double factor(size_t g, int64_t e) const;
  std::vector<Fn> fns_;
  LambdaContext ctx_;
};

}  // namespace tr::optim
