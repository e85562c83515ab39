// LR schedulers (lib/optim/lr_scheduler.h, schedulers/, lambda_expr.h, scheduler_registry.h): the seeds' LambdaLR
// examples, equality with torch 1.13 on tests/fixtures/scheduler_fixtures.json (written by
// generators/make_scheduler_fixtures.py; lrs and momenta bit for bit where a case says exact, as all
// do, else to rtol 1e-12; the seeds' examples bit for bit), state_dict keys and round trips, errors.
#include <catch2/catch.hpp>
#include "unit/fixtures.h"
#include <cmath>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include "ops/ops.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/scheduler_registry.h"
#include "optim/schedulers/closed_form_schedulers.h"
#include "optim/schedulers/lambda_lr.h"
#include "optim/schedulers/one_cycle_lr.h"
#include "optim/schedulers/sequential_lr.h"
#include "optim/sgd.h"

namespace test_lr_scheduler {

using json = nlohmann::json;
using namespace tr;
using namespace tr::optim;
using Catch::Matchers::Contains;

namespace {

bool close(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)) + 1e-18; }

// The fixture's [scheduler] table (JSON) as TOML.
toml::table to_toml(const json& j);
toml::array to_toml_array(const json& j) {
  toml::array a;
  for (const auto& e : j) {
    if (e.is_object())
      a.push_back(to_toml(e));
    else if (e.is_string())
      a.push_back(e.get<std::string>());
    else if (e.is_boolean())
      a.push_back(e.get<bool>());
    else if (e.is_number_integer())
      a.push_back(e.get<int64_t>());
    else
      a.push_back(e.get<double>());
  }
  return a;
}
toml::table to_toml(const json& j) {
  toml::table t;
  for (const auto& [k, v] : j.items()) {
    if (v.is_object())
      t.insert(k, to_toml(v));
    else if (v.is_array())
      t.insert(k, to_toml_array(v));
    else if (v.is_string())
      t.insert(k, v.get<std::string>());
    else if (v.is_boolean())
      t.insert(k, v.get<bool>());
    else if (v.is_number_integer())
      t.insert(k, v.get<int64_t>());
    else
      t.insert(k, v.get<double>());
  }
  return t;
}

// Two param groups (3 and 2 elements), like the fixture script's.
std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const std::vector<double>& lrs) {
  std::vector<ParamGroup> groups;
  for (size_t i = 0; i < lrs.size(); ++i) {
    Tensor p = zeros({static_cast<int64_t>(3 - i)}, DType::F64);
    p.requires_grad_();
    groups.push_back({{p}, {{"lr", lrs[i]}}, "g" + std::to_string(i)});
  }
  if (kind == "adam") return std::make_unique<Adam>(std::move(groups), AdamOptions{.lr = lrs[0]});
  return std::make_unique<SGD>(std::move(groups), SGDOptions{.lr = lrs[0], .momentum = 0.9});
}

SchedulerContext context_of(const json& c) {
  SchedulerContext ctx;
  ctx.total_steps = c.at("total_steps");
  ctx.steps_per_epoch = c.at("steps_per_epoch");
  ctx.epochs = c.at("epochs");
  ctx.warmup_steps = c.at("warmup_steps");
  ctx.file = "scheduler_fixtures.json";
  return ctx;
}

struct Run {
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LRScheduler> sched;
};

Run build(const json& c) {
  Run r;
  r.opt = make_optimizer(c.at("optimizer"), c.at("lrs"));
  r.sched = make_scheduler(to_toml(c.at("config")), *r.opt, context_of(c.at("ctx")));
  return r;
}

// The training loop's order: optimizer.step(), then scheduler.step().
void advance(Run& r) {
  r.opt->step();  // no gradients: parameters stay, the step is what counts
  r.sched->optimizer_stepped();
  r.sched->step();
}

std::vector<double> momenta(const Optimizer& opt) {
  std::vector<double> m;
  for (const auto& g : opt.param_groups())
    m.push_back(g.options.count("beta1") ? g.options.at("beta1") : g.options.at("momentum"));
  return m;
}

// Every key of torch's state dict, with an equal value (numbers to rtol 1e-12), in ours.
void compare_state(const json& ours, const json& torch, const std::string& path, std::vector<std::string>& errors) {
  if (torch.is_null()) return;
  if (torch.is_object()) {
    if (!ours.is_object()) return errors.push_back(path + ": not an object");
    for (const auto& [k, v] : torch.items()) {
      // always False in torch / Python callables (ours are expression strings)
      if (k == "verbose" || k == "_get_lr_called_within_step" || k == "lr_lambdas") continue;
      if (!ours.contains(k)) {
        errors.push_back(path + ": missing key '" + k + "'");
        continue;
      }
      compare_state(ours.at(k), v, path + "." + k, errors);
    }
  } else if (torch.is_array()) {
    if (!ours.is_array() || ours.size() != torch.size()) return errors.push_back(path + ": array size differs");
    for (size_t i = 0; i < torch.size(); ++i)
      compare_state(ours[i], torch[i], path + "[" + std::to_string(i) + "]", errors);
  } else if (torch.is_number()) {
    if (!ours.is_number() || !close(ours.get<double>(), torch.get<double>()))
      errors.push_back(path + ": " + ours.dump() + " != torch " + torch.dump());
  } else if (ours != torch) {
    errors.push_back(path + ": " + ours.dump() + " != torch " + torch.dump());
  }
}

const json& load_cases() { return fixture_json("scheduler_fixtures.json").at("cases"); }

toml::table parse(const std::string& text) { return toml::parse(std::string_view(text), std::string_view("cfg.toml")); }

const toml::table& section(const toml::table& t) { return *t["scheduler"].as_table(); }

}  // namespace

// The seeds' LambdaLR worked examples (fixture "seeds"): x = [1, 2] (and z = 3 in a second group),
// plain SGD, loss sum(x) (+ z); lrs and parameters bit for bit as torch computed them.
void check_seed_example(const std::string& name, const std::vector<double>& printed_lrs) {
  const json* found = nullptr;
  for (const json& e : fixture_json("scheduler_fixtures.json").at("seeds"))
    if (e.at("name") == name) found = &e;
  REQUIRE(found);
  const json& ex = *found;
  const auto lrs = ex.at("lrs").get<std::vector<double>>();
  std::vector<Tensor> ps{tensor({1., 2.}), scalar_tensor(3.)};
  ps.resize(lrs.size());
  std::vector<ParamGroup> groups;
  for (size_t g = 0; g < ps.size(); ++g) {
    ps[g].requires_grad_();
    groups.push_back({{ps[g]}, {{"lr", lrs[g]}}, "g" + std::to_string(g)});
  }
  SGD opt(std::move(groups), SGDOptions{});
  LambdaLR scheduler(opt, ex.at("lambda").get<std::vector<std::string>>());
  auto flat = [&] {
    std::vector<double> v;
    for (const Tensor& p : ps)
      for (double x : p.reshape({-1}).tolist()) v.push_back(x);
    return v;
  };
  const json& want_lr = ex.at("lr");
  const json& want_params = ex.at("params");
  const int steps = ex.at("steps");
  REQUIRE(static_cast<int>(printed_lrs.size()) == steps);
  CHECK(scheduler.get_last_lr() == want_lr[0].get<std::vector<double>>());  // before any scheduler.step()
  for (int i = 1; i <= steps; ++i) {
    INFO("step " << i);
    opt.zero_grad();
    Tensor y = sum(ps[0]);
    if (ps.size() > 1) y = add(y, ps[1]);
    y.backward();
    opt.step();
    scheduler.optimizer_stepped();
    scheduler.step();
    CHECK(flat() == want_params[i].get<std::vector<double>>());
    CHECK(scheduler.get_last_lr() == want_lr[i].get<std::vector<double>>());
    CHECK(opt.lrs() == scheduler.get_last_lr());
    CHECK(scheduler.get_last_lr()[0] == Approx(printed_lrs[i - 1]).epsilon(1e-15));  // what the seeds print
  }
}

TEST_CASE("LambdaLR: the seeds' one-group example (lr 0.1 -> 0.4 -> 0.9 -> 1.6), bit for bit", "[scheduler][torch]") {
  check_seed_example("one_group", {0.4, 0.9, 1.6});
}

TEST_CASE("LambdaLR: the seeds' per-group example ([1, 2] -> [4, 4] -> [9, 6]), bit for bit", "[scheduler][torch]") {
  check_seed_example("two_groups", {4, 9});
  // the same with C++ callables (torch's Python lambdas); their state_dict entries are null
  Tensor x = tensor({1., 2.}), z = scalar_tensor(3.);
  SGD opt(std::vector<ParamGroup>{{{x}, {{"lr", 1.0}}, "x"}, {{z}, {{"lr", 2.0}}, "z"}}, SGDOptions{});
  LambdaLR s2(opt, std::vector<std::function<double(int64_t)>>{[](int64_t e) { return (e + 1.0) * (e + 1.0); },
                                                               [](int64_t e) { return e + 1.0; }});
  const std::vector<double> want[] = {{4, 4}, {9, 6}};
  for (int i = 0; i < 2; ++i) {
    s2.optimizer_stepped();
    s2.step();
    CHECK(s2.get_last_lr() == want[i]);
  }
  CHECK(s2.state_dict().at("lr_lambdas") == json::array({nullptr, nullptr}));
  SGD opt3(std::vector<ParamGroup>{{{x}, {{"lr", 1.0}}, "x"}, {{z}, {{"lr", 2.0}}, "z"}}, SGDOptions{});
  LambdaLR s3(opt3, std::vector<std::string>{"(epoch+1)^2", "epoch+1"});
  CHECK(s3.state_dict().at("lr_lambdas") == json::array({"(epoch+1)^2", "epoch+1"}));
  CHECK(opt3.param_groups()[1].options.at("initial_lr") == 2.0);
}

TEST_CASE("schedulers: lrs, momentum and state_dict equal torch 1.13's (scheduler_fixtures.json)",
          "[scheduler][torch]") {
  json cases = load_cases();
  REQUIRE(cases.size() >= 20);
  for (const json& c : cases) {
    const std::string name = c.at("name");
    INFO("case " << name);
    Run r = build(c);
    const json& lr = c.at("lr");
    const json& mom = c.at("momentum");
    const int steps = c.at("steps");
    const bool exact = c.value("exact", false);  // bit for bit (see the fixture script)
    REQUIRE(static_cast<int>(lr.size()) == steps + 1);
    for (int k = 0; k <= steps; ++k) {
      if (k > 0) advance(r);
      INFO("after " << k << " steps");
      auto want = lr[k].get<std::vector<double>>();
      const auto& got = r.sched->get_last_lr();
      REQUIRE(got.size() == want.size());
      for (size_t g = 0; g < want.size(); ++g) {
        INFO("group " << g << ": " << std::setprecision(17) << got[g] << " vs torch " << want[g]);
        if (exact)
          CHECK(got[g] == want[g]);
        else
          CHECK(close(got[g], want[g]));
        CHECK(r.opt->param_groups()[g].options.at("lr") == got[g]);
      }
      if (!mom.is_null()) {
        auto wm = mom[k].get<std::vector<double>>();
        auto gm = momenta(*r.opt);
        for (size_t g = 0; g < wm.size(); ++g) {
          INFO("momentum of group " << g << ": " << std::setprecision(17) << gm[g] << " vs torch " << wm[g]);
          if (exact)
            CHECK(gm[g] == wm[g]);
          else
            CHECK(close(gm[g], wm[g]));
        }
      }
    }
    std::vector<std::string> errors;
    compare_state(r.sched->state_dict(), c.at("state_dict"), "state_dict", errors);
    INFO("state_dict differences: " << json(errors).dump());
    CHECK(errors.empty());
  }
}

TEST_CASE("schedulers: state_dict round trip continues the schedule exactly", "[scheduler]") {
  for (const json& c : load_cases()) {
    INFO("case " << c.at("name").get<std::string>());
    const int steps = c.at("steps");
    const int k = steps / 2;
    Run a = build(c);
    for (int i = 0; i < k; ++i) advance(a);
    // export (through text, as a checkpoint's state.json would), import into a fresh scheduler
    json saved = json::parse(a.sched->state_dict().dump());
    Run b = build(c);
    // the optimizer's state travels separately (torch: optimizer.load_state_dict restores param_groups)
    for (size_t g = 0; g < a.opt->param_groups().size(); ++g)
      b.opt->param_groups()[g].options = a.opt->param_groups()[g].options;
    b.sched->load_state_dict(saved);
    CHECK(b.sched->state_dict() == a.sched->state_dict());
    CHECK(b.sched->get_last_lr() == a.sched->get_last_lr());
    for (int i = k; i < steps; ++i) {
      advance(a);
      advance(b);
      CHECK(b.sched->get_last_lr() == a.sched->get_last_lr());
      CHECK(momenta(*b.opt) == momenta(*a.opt));
    }
    CHECK(b.sched->state_dict() == a.sched->state_dict());
  }
}

TEST_CASE("schedulers: scheduler.step() before optimizer.step() is an error", "[scheduler]") {
  auto opt = make_optimizer("sgd", {0.1, 0.05});
  StepLR s(*opt, 2, 0.5);
  CHECK_THROWS_WITH(s.step(), Contains("StepLR: scheduler.step() called before optimizer.step()"));
  CHECK(s.last_epoch() == 0);
  opt->step();
  s.optimizer_stepped();
  s.step();
  s.step();  // torch checks the first step only
  CHECK(s.last_epoch() == 2);
  CHECK(s.get_last_lr() == std::vector<double>{0.05, 0.025});

  // through SequentialLR: its first child checks, and optimizer_stepped() is forwarded
  auto opt2 = make_optimizer("sgd", {0.1, 0.05});
  std::vector<std::unique_ptr<LRScheduler>> children;
  children.push_back(std::make_unique<ConstantLR>(*opt2, 0.5, 2));
  children.push_back(std::make_unique<ExponentialLR>(*opt2, 0.9));
  SequentialLR seq(*opt2, std::move(children), {2});
  CHECK_THROWS_WITH(seq.step(), Contains("scheduler.step() called before optimizer.step()"));
  seq.optimizer_stepped();
  for (int i = 0; i < 4; ++i) seq.step();
  CHECK(seq.last_epoch() == 4);
}

TEST_CASE("LambdaExpr: variables, helpers, and parse errors with the position", "[scheduler]") {
  LambdaVars v;
  v.step = 4;
  v.warmup_steps = 10;
  v.total_steps = 8;
  CHECK(LambdaExpr("warmup(step, warmup_steps)", "t")(v) == 0.5);
  CHECK(LambdaExpr("cosine(step, total_steps)", "t")(v) == Approx(0.5).margin(1e-15));
  CHECK(LambdaExpr("cosine(100, total_steps)", "t")(v) == 0.0);
  CHECK(LambdaExpr("warmup(20, warmup_steps)", "t")(v) == 1.0);
  CHECK(LambdaExpr("warmup(0, 0)", "t")(v) == 1.0);
  CHECK(LambdaExpr("2^3^2", "t")(v) == 512);
  CHECK(LambdaExpr("floor(7/2) + ceil(0.2) + pi - _pi", "t")(v) == 4);
  CHECK(LambdaExpr("step > 3 ? 1 : 0", "t")(v) == 1);

  CHECK_THROWS_WITH(LambdaExpr("0.9^epohc", "LambdaLR: lambda for param group 1"),
                    Contains("LambdaLR: lambda for param group 1: cannot parse '0.9^epohc'") &&
                        Contains("at position 4") && Contains("did you mean 'epoch'?"));
  CHECK_THROWS_WITH(LambdaExpr("epoch**2", "lambda"), Contains("position") && Contains("x^y, not x**y"));
  CHECK_THROWS_WITH(LambdaExpr("(epoch+1", "lambda"), Contains("cannot parse '(epoch+1'") && Contains("position"));
  CHECK_THROWS_WITH(LambdaExpr("", "lambda"), Contains("cannot parse ''"));
}

TEST_CASE("LambdaLR: step and epoch per interval", "[scheduler]") {
  auto opt = make_optimizer("sgd", {1.0, 1.0});
  LambdaContext ctx;
  ctx.interval = "step";
  ctx.steps_per_epoch = 4;
  LambdaLR s(*opt, std::vector<std::string>{"epoch", "step"}, ctx);
  CHECK(s.variables(0, 9).epoch == 2);
  CHECK(s.variables(0, 9).step == 9);
  ctx.interval = "epoch";
  s.set_context(ctx);
  CHECK(s.variables(0, 3).epoch == 3);
  CHECK(s.variables(0, 3).step == 12);
  CHECK(s.variables(1, 3).base_lr == 1.0);
  // a non-finite factor names the group and the variables
  CHECK_THROWS_WITH(LambdaLR(*opt, std::vector<std::string>{"cosine(step, total_steps)"}),
                    Contains("param group 0") && Contains("nan") && Contains("total_steps=0"));
  CHECK_THROWS_WITH(LambdaLR(*opt, std::vector<std::string>{"1", "2", "3"}), Contains("expected 2 lr_lambdas"));
}

TEST_CASE("make_scheduler: a bad lambda names the file, the group and the position", "[scheduler]") {
  auto opt = make_optimizer("sgd", {0.1, 0.05});
  auto t = parse("[scheduler]\ntype = \"lambda\"\nlambda = [\"0.95^epoch\", \"0.9^epohc\"]\n");
  SchedulerContext ctx;
  ctx.file = "cfg.toml";
  CHECK_THROWS_WITH(make_scheduler(section(t), *opt, ctx),
                    Contains("cfg.toml:3:") && Contains("lambda for param group 1 ('g1')") &&
                        Contains("at position 4") && Contains("did you mean 'epoch'?"));
  auto t2 = parse("[scheduler]\ntype = \"lambda\"\nlambda = [\"1\", \"1\", \"1\"]\n");
  CHECK_THROWS_WITH(make_scheduler(section(t2), *opt, ctx),
                    Contains("cfg.toml:3:") && Contains("one per param group (2)"));
}

TEST_CASE("make_scheduler: unknown keys and types are rejected with the nearest name", "[scheduler]") {
  auto opt = make_optimizer("sgd", {0.1, 0.05});
  SchedulerContext ctx;
  ctx.file = "cfg.toml";
  ctx.epochs = 10;
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"cosine\"\nT_mx = 10\n")), *opt, ctx),
                    Contains("cfg.toml:3:") && Contains("unknown key 'T_mx'") && Contains("did you mean 'T_max'?"));
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"cosin\"\n")), *opt, ctx),
                    Contains("cfg.toml:2:") && Contains("did you mean 'cosine'?"));
  CHECK_THROWS_WITH(
      make_scheduler(section(parse("[scheduler]\ntype = \"step\"\ninterval = \"batch\"\nstep_size = 2\n")), *opt, ctx),
      Contains("interval") && Contains("epoch"));
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"step\"\n")), *opt, ctx),
                    Contains("missing required key 'step_size'"));
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"sequential\"\nmilestones = [2]\n"
                                                 "schedulers = [{type = \"constant\", interval = \"step\"}, {type = "
                                                 "\"step\", step_size = 1, gama = 0.5}]\n")),
                                   *opt, ctx),
                    Contains("not on its children"));
  CHECK_THROWS_WITH(
      make_scheduler(
          section(parse("[scheduler]\ntype = \"sequential\"\nmilestones = [2]\n"
                        "schedulers = [{type = \"constant\"}, {type = \"step\", step_size = 1, gama = 0.5}]\n")),
          *opt, ctx),
      Contains("unknown key 'gama'") && Contains("schedulers[1]") && Contains("did you mean 'gamma'?"));
  CHECK_THROWS_WITH(
      make_scheduler(section(parse("[scheduler]\ntype = \"sequential\"\nmilestones = [2, 4]\n"
                                   "schedulers = [{type = \"constant\"}, {type = \"exponential\", gamma = 0.5}]\n")),
                     *opt, ctx),
      Contains("expected one fewer than schedulers"));
  // a scheduler's own checks get the table's location
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"linear\"\nstart_factor = 2.0\n")), *opt, ctx),
                    Contains("cfg.toml:1:1") && Contains("between 0 and 1"));
  // no default for T_max when the run length is unknown
  ctx.epochs = 0;
  CHECK_THROWS_WITH(make_scheduler(section(parse("[scheduler]\ntype = \"cosine\"\n")), *opt, ctx),
                    Contains("'T_max' is required here"));
}

TEST_CASE("make_scheduler: intervals and defaults", "[scheduler]") {
  auto opt = make_optimizer("sgd", {0.1, 0.05});
  SchedulerContext ctx;
  ctx.total_steps = 100;
  ctx.steps_per_epoch = 10;
  ctx.epochs = 10;
  auto s = make_scheduler(section(parse("[scheduler]\ntype = \"cosine\"\n")), *opt, ctx);
  CHECK(s->interval() == "epoch");
  CHECK(s->state_dict().at("T_max") == 10);
  s = make_scheduler(section(parse("[scheduler]\ntype = \"cosine\"\ninterval = \"step\"\n")), *opt, ctx);
  CHECK(s->interval() == "step");
  CHECK(s->state_dict().at("T_max") == 100);
  s = make_scheduler(section(parse("[scheduler]\ntype = \"onecycle\"\nmax_lr = 1.0\n")), *opt, ctx);
  CHECK(s->interval() == "step");
  CHECK(s->state_dict().at("total_steps") == 100);
  s = make_scheduler(section(parse("[scheduler]\ntype = \"sequential\"\ninterval = \"step\"\nmilestones = [10]\n"
                                   "schedulers = [{type = \"linear\", total_iters = 10}, {type = \"cosine\"}]\n")),
                     *opt, ctx);
  auto* seq = dynamic_cast<SequentialLR*>(s.get());
  REQUIRE(seq);
  CHECK(seq->schedulers()[1]->state_dict().at("T_max") == 90);  // the rest of the run
  CHECK(seq->schedulers()[1]->interval() == "step");
}

TEST_CASE("OneCycleLR: stepping past total_steps is an error", "[scheduler]") {
  auto opt = make_optimizer("sgd", {0.1, 0.05});
  OneCycleOptions o;
  o.max_lr = {1.0};
  o.total_steps = 10;
  OneCycleLR s(*opt, o);
  CHECK(opt->param_groups()[0].options.at("momentum") == 0.95);
  CHECK(opt->param_groups()[0].options.at("initial_lr") == 1.0 / 25);
  for (int i = 0; i < 10; ++i) {  // torch allows last_epoch == total_steps
    s.optimizer_stepped();
    s.step();
  }
  CHECK_THROWS_WITH(s.step(), Contains("tried to step 12 times. The specified number of total steps is 10"));
  CHECK(s.last_epoch() == 10);  // a failed step changes nothing
  o.max_lr = {1.0, 2.0, 3.0};
  CHECK_THROWS_WITH(OneCycleLR(*opt, o), Contains("expected 2 values for max_lr"));
}

}  // namespace test_lr_scheduler
