#include "train/nonfinite_forensics.h"
#include <cmath>
#include <filesystem>
#include <fstream>
#include "ops/ops.h"
#include "ops/registry.h"
#include "train/progress.h"

namespace tr::train {

std::string nonfinite_in_step(Run& run, const Tensor& loss_part) {
  std::string what;
  // with ranks, each holds only its part of the loss: the gradients (equal on every rank after the
  // allreduce) decide, so that every rank decides alike; the loss line's check follows the step
  if (!run.pg && !std::isfinite(loss_part.item())) what = str("the loss is ", json_num(loss_part.item()));
  std::vector<Tensor> grads;
  for (const Tensor& p : run.optimizer->params()) grads.push_back(p.grad());
  bool bad = any_non_finite(grads).item() != 0;
  if (run.sharded_optimizer) bad = run.sharded_optimizer->any(bad);  // each rank holds a shard of them
  if (bad) what += str(what.empty() ? "" : " and ", "the gradients hold an inf or a NaN");
  return what;
}

namespace {

// The batch's samples, for reproducing the step outside the run; returns the file.
std::string save_batch_indices(Run& r, const NonfiniteStep& s) {
  nlohmann::json j;
  j["step"] = s.step;
  j["what"] = s.what;
  for (const auto& b : s.micro) {
    j["epoch"] = b.epoch;
    j["batches"].push_back({{"index", b.index}, {"indices", b.indices}});
  }
  const std::string file = str(r.cfg.run_dir(), "/nonfinite_step_", s.step,
                               r.env.active() ? str("_rank", r.env.rank) : std::string(), ".json");
  std::filesystem::create_directories(r.cfg.run_dir());
  std::ofstream f(file);
  f << j.dump() << "\n";
  return file;
}

// While it lives, the modules whose forward has begun and not ended, innermost last.
class LayerTrail {
 public:
  explicit LayerTrail(nn::Module& net) {
    for (auto& [name, m] : net.named_modules()) {
      const std::string label = name.empty() ? m->type_name() : str("'", name, "' (", m->type_name(), ")");
      const int pre = m->register_forward_pre_hook([this, label](nn::Module&, const std::vector<Tensor>&) {
        layers_.push_back(label);
        return std::vector<Tensor>();
      });
      const int post = m->register_forward_hook([this](nn::Module&, const std::vector<Tensor>&, const Tensor&) {
        if (!layers_.empty()) layers_.pop_back();
        return Tensor();
      });
      hooks_.push_back({m, pre, post});
    }
  }
  ~LayerTrail() {
    for (const Hooks& h : hooks_) {
      h.module->remove_hook(h.pre);
      h.module->remove_hook(h.post);
    }
  }
  LayerTrail(const LayerTrail&) = delete;
  LayerTrail& operator=(const LayerTrail&) = delete;
  const std::vector<std::string>& layers() const { return layers_; }

 private:
  struct Hooks {
    nn::Module* module;
    int pre, post;
  };
  std::vector<std::string> layers_;
  std::vector<Hooks> hooks_;
};

// The op (and the layer or pass) that made the first inf or NaN from finite inputs in the step
// run again from its starting random state; "" when none did.
std::string find_culprit(Run& r, const NonfiniteStep& s, const StepRerun& rerun) {
  LayerTrail trail(*r.model.net);
  default_generator().set_state(s.rng_at_start);
  r.optimizer->zero_grad();
  bool in_backward = false;
  std::string culprit;
  NonFiniteOpCheck::set_enabled(true);
  try {
    rerun(&in_backward);
  } catch (const NonFiniteOpError& e) {
    culprit = str(e.what(), in_backward              ? std::string(" in the backward pass")
                            : trail.layers().empty() ? std::string(" in the loss")
                                                     : " in layer " + trail.layers().back() + " (forward)");
  }
  NonFiniteOpCheck::set_enabled(false);
  return culprit;
}

// Why the re-run found no op to blame.
std::string no_culprit(Run& r) {
  std::vector<std::string> bad;
  for (const auto& [name, p] : r.model.net->named_parameters())
    if (any_non_finite({p}).item() != 0) bad.push_back(name);
  return bad.empty() ? std::string("the re-run made no inf or NaN from finite values (the step is not reproducible)")
                     : str("no op made one from finite inputs: the parameters already hold one (", bad,
                           "): an earlier step applied it");
}

}  // namespace

void stop_nonfinite(Run& r, const NonfiniteStep& s, const StepRerun& rerun) {
  const std::string file = save_batch_indices(r, s);
  std::string culprit = find_culprit(r, s, rerun);
  if (culprit.empty()) culprit = no_culprit(r);
  throw Error(str("training diverged at step ", s.step, " (epoch ", s.micro.front().epoch, "): ", s.what, "; ", culprit,
                  ". The step was not applied; the batch's sample indices are in ", file,
                  ". Lower [optimizer] lr (now ", json_num(r.optimizer->lrs()[0]),
                  "), clip gradients ([train] grad_clip), or skip such steps with [train] "
                  "nonfinite = \"skip\""));
}

}  // namespace tr::train
