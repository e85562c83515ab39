// A checkpoint's state.json: parsed, read as CheckpointState (every key's type checked), then each
// part handed to what restores it: the optimizer's groups to an optimizer of the named type (two
// groups of small parameters), the scheduler's state to every scheduler type, the GradScaler's
// state to an enabled GradScaler, the resolved config to the TOML parser.
#include <nlohmann/json.hpp>
#include "amp/grad_scaler.h"
#include "fuzz_util.h"
#include "ops/factories.h"
#include "optim/optimizer_registry.h"
#include "optim/optimizer_state.h"
#include "optim/scheduler_registry.h"
#include "toml/toml_table.h"
#include "train/checkpoint_state.h"

namespace {

using namespace tr;

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& type) {
  const optim::OptimizerType* t = Registry<optim::OptimizerType>::get().find(type);
  if (!t) return nullptr;
  const toml::table none;
  const TomlTable empty(none, "fuzz", "optimizer");
  optim::Options defaults = optim::read_hyperparameters(empty, type, true);
  std::vector<optim::ParamGroup> groups(2);
  groups[0].params = {zeros({3}), zeros({2, 2})};
  groups[1].params = {zeros({1})};
  groups[0].name = "0";
  groups[1].name = "1";
  return t->build(std::move(groups), defaults);
}

const char* kSchedulers[] = {
    "type = 'step'\nstep_size = 2",
    "type = 'cosine'\nT_max = 10",
    "type = 'exponential'\ngamma = 0.9",
    "type = 'onecycle'\nmax_lr = 0.1",
    "type = 'lambda'\nlambda = '0.95^epoch'",
    "type = 'multistep'\nmilestones = [2, 4]",
    "type = 'sequential'\nmilestones = [3]\nschedulers = [{type = 'linear'}, {type = 'cosine'}]",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;  // not JSON: verify_checkpoint reports that before anything reads it
  fuzz::expect_clean_error([&] {
    train::CheckpointState s = train::CheckpointState::from_json(j, "fuzz/state.json");
    if (s.to_json().is_null()) __builtin_trap();
    fuzz::expect_clean_error([&] { (void)parse_toml_text(s.config, "fuzz/state.json (config)"); });
    if (s.scaler)
      fuzz::expect_clean_error([&] {
        amp::GradScalerOptions o;
        o.enabled = true;
        amp::GradScaler scaler(o);
        scaler.load_state_dict(s.scaler->state);
      });
    const std::string registered = optim::optimizer_name_of_class(s.optimizer_type);
    auto opt = make_optimizer(registered.empty() ? "adamw" : registered);
    fuzz::expect_clean_error([&] {
      optim::OptimizerState os;
      os.param_groups = s.param_groups;
      os.step_count = s.optimizer_step_count;
      optim::load_state_dict(*opt, os);
    });
    if (s.scheduler.is_null()) return;
    for (const char* text : kSchedulers) {
      fuzz::expect_clean_error([&] {
        auto fresh = make_optimizer("sgd");
        toml::table t = parse_toml_text(text, "fuzz scheduler");
        optim::SchedulerContext ctx;
        ctx.total_steps = 20;
        ctx.steps_per_epoch = 5;
        ctx.epochs = 4;
        auto sched = optim::make_scheduler(t, *fresh, ctx);
        sched->load_state_dict(s.scheduler);
        sched->step();
      });
    }
  });
  return 0;
}
