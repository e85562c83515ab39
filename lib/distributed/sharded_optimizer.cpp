#include "distributed/sharded_optimizer.h"
#include <algorithm>
#include <map>
#include <set>
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr::distributed {

ShardedOptimizer::ShardedOptimizer(optim::Optimizer& opt, DistributedDataParallel& ddp) : opt_(opt), ddp_(ddp) {
  TR_CHECK(ddp.sharded(), "ShardedOptimizer: DDP was built without [dist] shard");
  const auto& params = ddp.params();
  std::map<const TensorImpl*, size_t> index;
  for (size_t k = 0; k < params.size(); ++k) index[params[k].impl()] = k;
  piece_of_.assign(params.size(), -1);
  const auto& pieces = ddp.shard_pieces();
  for (size_t i = 0; i < pieces.size(); ++i) piece_of_[pieces[i].param] = int(i);
  for (auto& g : opt.param_groups()) {
    views_.emplace_back();
    param_.emplace_back();
    for (const Tensor& p : g.params) {
      auto it = index.find(p.impl());
      TR_CHECK(it != index.end(), "[dist] shard: a parameter of param group '", g.name, "' (shape ", p.sizes(),
               ") is not one DDP reduces (does it require grad?)");
      param_.back().push_back(it->second);
      if (piece_of_[it->second] >= 0) views_.back().push_back(pieces[size_t(piece_of_[it->second])].view);
    }
  }
  swap_in_views();
}

void ShardedOptimizer::swap_in_full() {
  for (size_t gi = 0; gi < param_.size(); ++gi) {
    std::vector<Tensor>& ps = opt_.param_groups()[gi].params;
    ps.clear();
    for (size_t k : param_[gi]) ps.push_back(ddp_.params()[k]);
  }
}

void ShardedOptimizer::swap_in_views() {
  for (size_t gi = 0; gi < views_.size(); ++gi) opt_.param_groups()[gi].params = views_[gi];
}

std::vector<std::pair<Tensor, optim::ParamState>> ShardedOptimizer::view_states() const {
  std::vector<std::pair<Tensor, optim::ParamState>> r;
  for (const auto& piece : ddp_.shard_pieces())
    if (const optim::ParamState* st = opt_.find_state(piece.view)) r.emplace_back(piece.view, *st);
  return r;
}

void ShardedOptimizer::set_view_states(std::vector<std::pair<Tensor, optim::ParamState>> states) {
  opt_.clear_state();
  swap_in_views();
  for (auto& [v, st] : states) opt_.state(v) = std::move(st);
}

optim::OptimizerState ShardedOptimizer::state_dict() {
  NoGradGuard ng;
  ProcessGroup& pg = ddp_.process_group();
  const auto& params = ddp_.params();
  const auto& pieces = ddp_.shard_pieces();
  const size_t n = params.size();
  // each parameter's state keys after its first update (its group's options say which)
  std::vector<std::vector<std::string>> keys_of(n);
  for (size_t gi = 0; gi < param_.size(); ++gi) {
    const std::vector<std::string> keys = opt_.state_keys(opt_.param_groups()[gi].options);
    for (size_t k : param_[gi]) keys_of[k] = keys;
  }
  auto keeps = [&](size_t k, const std::string& key) {
    return std::find(keys_of[k].begin(), keys_of[k].end(), key) != keys_of[k].end();
  };

  // 1. Which parameters have state, and their step: the rank owning a parameter's first element says.
  std::vector<double> info(2 * n, 0.0);
  for (size_t k = 0; k < n; ++k) {
    if (piece_of_[k] < 0 || ddp_.owner_of(k, 0) != pg.rank()) continue;
    const optim::ParamState* st = opt_.find_state(pieces[size_t(piece_of_[k])].view);
    if (!st || st->empty()) continue;
    info[2 * k] = 1;
    if (st->count("step")) info[2 * k + 1] = st->at("step").item();
  }
  pg.allreduce_values(info, ReduceOp::SUM,
                      "ZeRO: which parameters have optimizer state");  // exact: one value plus zeros

  // 2. Each per-element state key, bucket by bucket: the windows all-gathered, cut on rank 0.
  std::vector<optim::ParamState> gathered(n);
  for (size_t k = 0; k < n; ++k)  // (a 0-dim f32, as torch's and our Adam keep it)
    if (info[2 * k] != 0 && keeps(k, "step")) gathered[k]["step"] = full({}, info[2 * k + 1], DType::F32);
  const auto layouts = ddp_.bucket_layouts();
  const int world = pg.size();
  for (size_t bi = 0; bi < layouts.size(); ++bi) {
    const auto& b = layouts[bi];
    std::set<std::string> keys;  // those some parameter of the bucket keeps (the same on every rank)
    for (size_t k : b.params)
      if (info[2 * k] != 0)
        for (auto& key : keys_of[k])
          if (key != "step") keys.insert(key);
    const Tensor& first = params[b.params[0]];
    for (const std::string& key : keys) {
      Tensor flat = zeros({b.window * world}, TensorOptions(first.dtype()).device(first.device()));
      Tensor mine = flat.narrow(0, b.window * pg.rank(), b.window);
      for (const auto& piece : pieces) {
        if (piece.bucket != bi) continue;
        const optim::ParamState* st = opt_.find_state(piece.view);
        if (!st || !st->count(key)) continue;
        const Tensor& s = st->at(key);
        TR_CHECK(s.numel() == piece.numel && s.dtype() == first.dtype(), "ZeRO: optimizer state '", key,
                 "' of parameter '", ddp_.param_names()[piece.param],
                 "' is not one value per element in the parameter's dtype");
        mine.narrow(0, piece.offset, piece.numel).copy_(s.reshape({-1}));
      }
      pg.label_next(str("ZeRO: optimizer state '", key, "' of bucket ", bi, " of ", layouts.size()));
      pg.allgather_into(flat, mine);
      if (pg.rank() != 0) continue;
      for (size_t s = 0; s < b.params.size(); ++s) {
        const size_t k = b.params[s];
        if (info[2 * k] == 0 || !keeps(k, key)) continue;
        gathered[k][key] =
            flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]).reshape(params[k].sizes()).clone();
      }
    }
  }

  // 3. torch's layout, written by optim::state_dict over the full parameters
  auto mine = view_states();
  opt_.clear_state();
  swap_in_full();
  if (pg.rank() == 0)
    for (size_t k = 0; k < n; ++k)
      if (!gathered[k].empty()) opt_.state(params[k]) = std::move(gathered[k]);
  optim::OptimizerState s = optim::state_dict(opt_);
  set_view_states(std::move(mine));
  return s;
}

void ShardedOptimizer::load_state_dict(const optim::OptimizerState& s) {
  NoGradGuard ng;
  const auto& params = ddp_.params();
  const auto& pieces = ddp_.shard_pieces();
  auto before = view_states();
  opt_.clear_state();
  swap_in_full();
  try {
    optim::load_state_dict(opt_, s);
  } catch (...) {  // this optimizer's state stays as it was
    set_view_states(std::move(before));
    throw;
  }
  std::vector<std::pair<Tensor, optim::ParamState>> cut;
  for (size_t k = 0; k < params.size(); ++k) {
    const optim::ParamState* st = opt_.find_state(params[k]);
    if (!st || piece_of_[k] < 0) continue;
    const ShardPiece& piece = pieces[size_t(piece_of_[k])];
    optim::ParamState mine;
    for (const auto& [key, t] : *st)
      mine[key] = key != "step" && t.numel() == params[k].numel()
                      ? t.reshape({-1}).narrow(0, piece.begin, piece.numel).clone()
                      : t.clone();
    cut.emplace_back(piece.view, std::move(mine));
  }
  set_view_states(std::move(cut));
}

bool ShardedOptimizer::any(bool local) { return reduce(local ? 1.0 : 0.0, true) != 0; }

double ShardedOptimizer::reduce(double local, bool is_max) {
  std::vector<double> v{local};
  ddp_.process_group().allreduce_values(v, is_max ? ReduceOp::MAX : ReduceOp::SUM,
                                        is_max ? "ZeRO: a max over the ranks" : "ZeRO: a sum over the ranks");
  return v[0];
}

}  // namespace tr::distributed
