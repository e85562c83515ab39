// ZeRO on forked gloo ranks (distributed/ddp.h, sharded_optimizer.h): DDP with shard = optimizer
// or gradients trains the same bits as unsharded DDP, also with parameters unused on some ranks or
// on all (find_unused_parameters) and over several uneven buckets and 3 ranks; the gathered state
// is the unsharded optimizer's state, and a full state loads into a sharded optimizer.
#include <catch2/catch.hpp>
#include "unit/fork_ranks.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "distributed/ddp.h"
#include "distributed/sharded_optimizer.h"
#include "nn/layers/linear.h"
#include "nn/layers/tanh.h"
#include "ops/factories.h"
#include "ops/ops.h"
#include "optim/adam.h"
#include "optim/optimizer_state.h"

namespace test_zero {

using namespace fork_ranks;

namespace {

// a -> tanh -> b, and b only when use_b: b is unused in some steps (on some ranks, or on all)
class TwoLayers : public nn::Module {
 public:
  TwoLayers() : Module("TwoLayers") {
    a = register_module("a", std::make_shared<nn::Linear>(6, 9));
    b = register_module("b", std::make_shared<nn::Linear>(9, 9));
    head = register_module("head", std::make_shared<nn::Linear>(9, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh((*a)(x));
    if (use_b) h = (*b)(h);
    return (*head)(h);
  }
  std::shared_ptr<nn::Linear> a, b, head;
  bool use_b = true;
};

struct Replica {
  std::shared_ptr<TwoLayers> net;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::Adam> opt;
  std::unique_ptr<ShardedOptimizer> sharded;

  Replica(ProcessGroup& pg, Shard shard) {
    manual_seed(11);
    net = std::make_shared<TwoLayers>();
    DDPOptions o;
    o.bucket_mb = 100.0 / (1 << 20);  // ~100 bytes: several buckets, parameters split unevenly
    o.find_unused_parameters = true;
    o.shard = shard;
    ddp = std::make_unique<DistributedDataParallel>(*net, pg, o);
    optim::AdamOptions ao;
    ao.lr = 0.05;
    ao.weight_decay = 0.01;
    std::vector<optim::ParamGroup> groups{{{net->a->parameters()}, {}, "a"},
                                          {{net->b->parameters()}, {{"lr", 0.02}}, "b"},
                                          {{net->head->parameters()}, {}, "head"}};
    opt = std::make_unique<optim::Adam>(groups, ao, /*decoupled=*/true);
    if (shard != Shard::None) sharded = std::make_unique<ShardedOptimizer>(*opt, *ddp);
  }

  void step(const Tensor& x, const Tensor& y, bool use_b) {
    net->use_b = use_b;
    opt->zero_grad();
    ddp->prepare(true);
    mse_loss(ddp->forward(x), y).backward();
    ddp->finish();
    opt->step();
    ddp->gather_params();
  }
};

}  // namespace

TEST_CASE("ZeRO-1/2 on 3 ranks: DDP's bits, unused parameters, the gathered and the loaded state", "[dist][zero]") {
  const int world = 3;
  auto res = run_ranks(world, [](int rank, Store& store, std::ostream&) {
    auto pg = gloo_group(store, rank, world);
    Replica plain(*pg, Shard::None), zero1(*pg, Shard::Optimizer), zero2(*pg, Shard::Gradients);
    EXPECT(zero2.ddp->num_buckets() >= 3, "buckets: ", zero2.ddp->num_buckets());
    for (int s = 0; s < 6; ++s) {
      manual_seed(uint64_t(100 * s + rank));  // each rank its own batch
      Tensor x = randn({5, 6}), y = randn({5, 4});
      // b: used everywhere, on rank 0 only, nowhere (its gradient stays None, Adam skips it)
      const bool use_b = s < 2 || (s < 4 && rank == 0);
      for (Replica* r : {&plain, &zero1, &zero2}) r->step(x, y, use_b);
      for (Replica* r : {&zero1, &zero2}) {
        auto want = plain.net->named_parameters(), got = r->net->named_parameters();
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT(equal(want[i].second, got[i].second), "step ", s, ": parameter ", want[i].first, " differs (shard ",
                 shard_name(r->ddp->shard()), ")");
        EXPECT(!r->net->b->parameters()[0].grad().defined(), "sharded: the full gradient exists nowhere");
      }
    }
    // the state: a third of it on each rank, gathered into the unsharded optimizer's, bit for bit
    const int64_t full = optim::state_bytes(*plain.opt);
    EXPECT(optim::state_bytes(*zero2.opt) < full / 2, "rank ", rank, " holds ", optim::state_bytes(*zero2.opt), " of ",
           full, " bytes of state");
    optim::OptimizerState want = optim::state_dict(*plain.opt);
    for (Replica* r : {&zero1, &zero2}) {
      optim::OptimizerState got = r->sharded->state_dict();
      EXPECT(got.param_groups == want.param_groups, "param groups: ", got.param_groups.dump());
      EXPECT(got.step_count == want.step_count, "step count");
      if (rank != 0) continue;
      EXPECT(got.tensors.size() == want.tensors.size(), got.tensors.size(), " state tensors, want ",
             want.tensors.size());
      for (auto& [name, t] : want.tensors)
        EXPECT(got.tensors.count(name) && got.tensors.at(name).sizes() == t.sizes() && equal(got.tensors.at(name), t),
               "state tensor ", name);
    }
    // a full state (as any checkpoint holds) into a fresh sharded replica: the next steps agree
    Replica fresh(*pg, Shard::Gradients);
    {
      NoGradGuard ng;
      auto src = plain.net->named_parameters(), dst = fresh.net->named_parameters();
      for (size_t i = 0; i < src.size(); ++i) dst[i].second.copy_(src[i].second);
    }
    fresh.sharded->load_state_dict(want);
    EXPECT(optim::state_bytes(*fresh.opt) == optim::state_bytes(*zero2.opt), "loaded state bytes");
    for (int s = 6; s < 8; ++s) {
      manual_seed(uint64_t(100 * s + rank));
      Tensor x = randn({5, 6}), y = randn({5, 4});
      plain.step(x, y, true);
      fresh.step(x, y, true);
    }
    auto a = plain.net->named_parameters(), b = fresh.net->named_parameters();
    for (size_t i = 0; i < a.size(); ++i) EXPECT(equal(a[i].second, b[i].second), "after loading: ", a[i].first);
    // a state of another shape is refused, and the optimizer keeps its own
    optim::OptimizerState bad = want;
    bad.tensors.begin()->second = zeros({2, 2});
    bool threw = false;
    try {
      fresh.sharded->load_state_dict(bad);
    } catch (const Error&) { threw = true; }
    EXPECT(threw, "a state of the wrong shape must be refused");
    EXPECT(optim::state_bytes(*fresh.opt) == optim::state_bytes(*zero2.opt), "state kept after the refused load");
  });
  require_all_ok(res);
}

}  // namespace test_zero
