// Run::Run: one step per part of the run, each reading its section of the config.
#include "train/run_setup.h"
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include "distributed/bind_address.h"
#include "io/safetensors.h"
#include "nn/activation_checkpoint.h"
#include "nn/layers/embedding.h"
#include "nn/layers/token_embedding.h"
#include "core/cuda_hooks.h"
#include "core/rng.h"
#include "data/transforms.h"
#include "ops/backends.h"
#include "optim/optimizer_registry.h"
#include "optim/param_groups.h"
#include "optim/scheduler_registry.h"
#include "train/gpt2_hf_io.h"

namespace tr::train {

namespace {

// [data] micro_batch_size and [train] tokens_per_step, as llm.c sizes a step (-b, -d): the global
// micro-batch is micro_batch_size x ranks, and accumulate = tokens_per_step / (global micro-batch
// x tokens per sample), which must be a whole number.
void resolve_batching(config::RunConfig& cfg, int64_t world, const nn::Model& model) {
  auto& d = cfg.data;
  auto& t = cfg.train;
  if (d.micro_batch_size > 0) d.batch_size = d.micro_batch_size * world;
  if (t.tokens_per_step <= 0) return;
  TR_CHECK(model.input.dtype == DType::I64 && model.input.shape.size() == 1, cfg.path,
           ": [train] tokens_per_step needs a token model (input int64 [T]); this model's input is ", model.input.str(),
           " (use accumulate)");
  const int64_t T = model.input.shape[0], per_micro = d.batch_size * T;
  TR_CHECK(
      t.tokens_per_step % per_micro == 0, cfg.path, ": [train] tokens_per_step = ", t.tokens_per_step,
      " is not a whole number of micro-steps of ", d.batch_size, " samples x ", T, " tokens = ", per_micro,
      d.micro_batch_size > 0 ? str(" (micro_batch_size ", d.micro_batch_size, " x ", world, " ranks)") : std::string(),
      "; llm.c asks the same of total_batch_size");
  t.accumulate = t.tokens_per_step / per_micro;
}

// [model] init: the starting weights (init_format = "gpt2_hf": Hugging Face's GPT-2, mapped onto
// the model's names), keys renamed by `prefix`, loaded strictly unless asked not to (then the keys
// that did not match are listed). Errors name the file and the config.
void load_initial_weights(nn::Module& net, const config::RunConfig& cfg) {
  const auto& m = cfg.model;
  nn::StateDict sd;
  std::set<std::string> seen;
  io::NamedTensorList tensors;
  try {
    tensors = m.init_format == "gpt2_hf" ? gpt2_hf::load_weights(m.init, net, m.is_inline ? cfg.path : m.file)
                                         : io::load_safetensors(m.init);
  } catch (const Error& e) { throw Error(str(cfg.path, ": [model] init = \"", m.init, "\": ", e.what())); }
  for (auto& [name, t] : tensors) {
    std::string key = name;
    for (const auto& [from, to] : m.prefix)
      if (key.rfind(from, 0) == 0) {
        key = to + key.substr(from.size());
        break;
      }
    TR_CHECK(seen.insert(key).second, cfg.path, ": [model] prefix maps two tensors of ", m.init, " to '", key, "'");
    sd.emplace_back(key, t);
  }
  nn::LoadResult r;
  try {
    r = net.load_state_dict(sd, m.strict);
  } catch (const Error& e) {
    throw Error(str(cfg.path, ": [model] init = \"", m.init, "\": ", e.what(),
                    m.strict ? " (strict = false loads the keys that match)" : ""));
  }
  if (!r.missing_keys.empty())
    std::fprintf(stderr,
                 "warning: %s: [model] init: %zu of the model's tensors are not in %s and keep their initial "
                 "values: %s\n",
                 cfg.path.c_str(), r.missing_keys.size(), m.init.c_str(), str(r.missing_keys).c_str());
  if (!r.unexpected_keys.empty())
    std::fprintf(stderr, "warning: %s: [model] init: %zu tensors of %s match no model tensor and are ignored: %s\n",
                 cfg.path.c_str(), r.unexpected_keys.size(), m.init.c_str(), str(r.unexpected_keys).c_str());
}

// [[optimizer.groups]] frozen = true: those parameters stop requiring grad before DDP and the
// optimizer see the model, so they get no gradient, no bucket and no optimizer state.
void freeze_groups(const config::RunConfig& cfg, nn::Module& model) {
  if (!cfg.optimizer.groups) return;
  optim::freeze_parameters(model, optim::parse_group_rules(*cfg.optimizer.groups, cfg.path, cfg.optimizer.type));
}

// The registered dataset of [data], its samples checked against the model's input.
data::DatasetSplits build_data(config::RunConfig& cfg, const TomlTable& t, const nn::Model& model) {
  data::DatasetContext ctx;
  ctx.seed = uint64_t(cfg.run.seed);
  ctx.input_shape = model.input.shape;
  ctx.config_dir = std::filesystem::path(cfg.path).parent_path().string();
  for (auto& [name, m] : model.net->named_modules()) {  // the first token embedding's rows
    if (auto* e = dynamic_cast<nn::TokenPositionEmbedding*>(m))
      ctx.vocab_size = e->vocab_size;
    else if (auto* e2 = dynamic_cast<nn::Embedding*>(m))
      ctx.vocab_size = e2->num_embeddings;
    if (ctx.vocab_size > 0) break;
  }
  data::DatasetSplits d = Registry<data::DatasetType>::get().at(cfg.data.dataset).build(t, ctx);
  for (const std::string& n : d.notes) std::fprintf(stderr, "warning: %s\n", n.c_str());
  const Shape sample = d.train->get(0).input.sizes();
  TR_CHECK(sample == model.input.shape, cfg.path, ": the model expects per-sample input ", model.input.str(),
           " but the ", cfg.data.dataset, " data gives ", sample);
  return d;
}

// Joins the process group of a data-parallel run and wraps the model in DDP.
void init_distributed(Run& r) {
  const auto& dc = r.cfg.dist;
  r.store = distributed::connect_store(r.env, &r.store_server);
  distributed::ProcessGroupOptions po;
  po.backend = dc.backend == "auto" ? (r.device.is_cpu() ? "gloo" : "nccl") : dc.backend;
  po.rank = r.env.rank;
  po.size = r.env.world_size;
  po.timeout = std::chrono::milliseconds(int64_t(dc.timeout_s * 1000));
  po.prefix = str("run", r.env.restart_count);
  po.node = r.env.node_rank;
  // the address the other ranks reach this one at (never Gloo's default, the machine's name, which
  // /etc/hosts often maps to 127.0.0.1); TRAINER_BIND_ADDR is --bind-addr passed on by the launcher
  if (po.backend == "gloo") {  // NCCL finds its own interface (NCCL_SOCKET_IFNAME)
    const char* given = std::getenv("TRAINER_BIND_ADDR");
    const distributed::BindAddress bind = distributed::choose_bind_address(r.env.master_addr, given ? given : "");
    po.hostname = bind.address;
    if (r.env.local_rank == 0 && (r.env.local_world_size < r.env.world_size || bind.by_user))
      std::fprintf(stderr, "%s\n", distributed::describe(bind).c_str());  // once per node
  }
  if (r.device.is_cuda()) po.cuda_device = r.device.index;
  r.pg = distributed::make_process_group(*r.store, po);
  distributed::DDPOptions o;
  o.bucket_mb = dc.bucket_mb;
  o.broadcast_buffers = dc.broadcast_buffers;
  o.find_unused_parameters = dc.find_unused_parameters;
  o.shard = distributed::parse_shard(dc.shard);
  r.ddp = std::make_unique<distributed::DistributedDataParallel>(*r.model.net, *r.pg, o);
  if (dc.hang_timeout_s > 0) {
    distributed::HangWatchdogOptions wo;
    wo.timeout_s = dc.hang_timeout_s;
    wo.factor = dc.hang_factor;
    wo.key_prefix = po.prefix + "/watchdog";
    if (r.env.local_world_size < r.env.world_size) {  // several nodes: the report says where each rank is
      wo.node = r.env.node_rank;
      wo.address = po.backend == "gloo" ? po.hostname : "";
    }
    auto own = std::make_unique<distributed::TCPStore>(r.env.master_addr, r.env.master_port, r.env.token, po.timeout);
    wo.store_address = own->address();
    r.watchdog = std::make_unique<distributed::HangWatchdog>(std::move(own), *r.pg, wo);
  }
}

// [train] ema_decay: a second model of the same definition that AveragedModel keeps the average
// in. Built without touching the random stream (its initial weights are overwritten anyway), so a
// run with EMA trains on exactly the numbers of the same run without.
std::unique_ptr<optim::AveragedModel> build_ema(const Run& r) {
  if (r.cfg.train.ema_decay <= 0) return nullptr;
  const GeneratorState rng = default_generator().get_state();
  nn::ModulePtr copy = build_model(r.cfg).net;
  default_generator().set_state(rng);
  if (r.dtype() != DType::F32) copy->to(r.dtype());
  if (!r.device.is_cpu()) copy->to(r.device);
  copy->eval();  // it is only ever evaluated
  return std::make_unique<optim::AveragedModel>(copy, *r.model.net, r.cfg.train.ema_decay);
}

// Parameter groups from [[optimizer.groups]], then the registered optimizer with [optimizer]'s
// hyperparameters as every group's defaults; its constructor's checks get the section's location.
std::unique_ptr<optim::Optimizer> build_optimizer(const config::RunConfig& cfg, nn::Module& model) {
  const auto& oc = cfg.optimizer;
  static const toml::array no_rules;
  std::vector<std::string> warnings;
  std::vector<optim::ParamGroup> groups = optim::build_param_groups(
      model, optim::parse_group_rules(oc.groups ? *oc.groups : no_rules, cfg.path, oc.type), &warnings);
  for (auto& w : warnings) std::fprintf(stderr, "warning: %s: %s\n", cfg.path.c_str(), w.c_str());
  try {
    return Registry<optim::OptimizerType>::get().at(oc.type).build(std::move(groups), oc.hyperparameters);
  } catch (const Error& e) { throw Error(str(cfg.path, ": [optimizer]: ", e.what())); }
}

// Mixed precision's loss scaler. No process group: DDP has averaged the gradients before
// unscale_, so an inf/NaN on any rank is on every rank and all ranks skip the same steps.
amp::GradScaler build_scaler(const config::AmpSection& a) {
  if (!a.enabled) return amp::GradScaler(amp::GradScalerOptions{.enabled = false});
  return amp::GradScaler({a.init_scale, a.growth_factor, a.backoff_factor, a.growth_interval, a.scaler});
}

// The training loader: batch_size samples per micro-batch (the global batch: each rank takes its
// slice of every batch), with [data] transforms.
std::unique_ptr<data::DataLoader> build_loader(const Run& r, std::vector<data::TransformPtr> transforms) {
  const auto& d = r.cfg.data;
  data::DataLoaderOptions lo;
  lo.batch_size = d.batch_size;
  lo.shuffle = d.shuffle;
  lo.drop_last = d.drop_last;
  lo.seed = uint64_t(r.cfg.run.seed);
  lo.num_workers = int(d.workers);
  lo.world_size = r.env.world_size;
  lo.rank = r.env.rank;
  TR_CHECK(d.batch_size % r.env.world_size == 0, r.cfg.path, ": [data] batch_size = ", d.batch_size,
           " is the global batch and must be divisible by the number of ranks (", r.env.world_size, ")");
  // checked here, not at the first eval, so that a run does not train until then for nothing
  const int64_t eval_bs = d.eval_batch_size > 0 ? d.eval_batch_size : d.batch_size;
  TR_CHECK(!r.data.eval || eval_bs % r.env.world_size == 0, r.cfg.path, ": [data] eval_batch_size = ", eval_bs,
           " must be divisible by the number of ranks (", r.env.world_size, ")");
  lo.transforms = std::move(transforms);
  auto loader = std::make_unique<data::DataLoader>(r.data.train, lo);
  TR_CHECK(loader->size() > 0, r.cfg.path, ": the training set (", r.data.train->size(), " samples) gives no batch of ",
           lo.batch_size, (lo.drop_last ? " with drop_last" : ""));
  return loader;
}

std::unique_ptr<optim::LRScheduler> build_scheduler(const Run& r) {
  if (!r.cfg.scheduler.enabled()) return nullptr;
  optim::SchedulerContext sc;
  sc.total_steps = r.total_steps;
  sc.steps_per_epoch = r.steps_per_epoch;
  sc.epochs = r.epochs();
  sc.file = r.cfg.path;
  return optim::make_scheduler(*r.cfg.scheduler.table, *r.optimizer, sc);
}

RunLoss build_loss(config::RunConfig& cfg) {
  TomlTable t = *cfg.loss.table;
  t.record_into(cfg.loss.resolved);
  const nn::LossType& type = t.get_registered<nn::LossType>("type", cfg.loss.type);
  nn::LossPtr loss = type.build(t);
  t.finish();
  return RunLoss(loss, type.classification);
}

}  // namespace

// In a run of several ranks "cuda" is cuda:LOCAL_RANK (torchrun's convention), and a fixed cuda:N,
// which would put every rank of the node on one GPU, is refused.
Device pick_device(const std::string& spec, const distributed::DistEnv& env, const std::string& path) {
  const std::string s = spec == "auto" ? (cuda::is_available() ? "cuda" : "cpu") : spec;
  if (s == "cpu" || !env.active() || env.local_world_size == 1) return Device(s);
  TR_CHECK(s == "cuda", path, ": [run] device = \"", spec, "\" would put all ", env.local_world_size,
           " ranks of this node on one GPU; use device = \"cuda\" (each rank takes cuda:LOCAL_RANK)");
  const int n = cuda::device_count();
  TR_CHECK(n > 0, path, ": [run] device = \"cuda\": ", cuda::unavailable_reason());
  TR_CHECK(env.local_rank < n, "rank ", env.rank, " (local rank ", env.local_rank, ") has no GPU of its own: ", n,
           " CUDA device(s) are visible to the ", env.local_world_size,
           " ranks of this node; start at most one rank per GPU (--nproc ", n, ", or --nproc gpu)");
  return Device(DeviceType::CUDA, env.local_rank);
}

nn::Model build_model(const config::RunConfig& cfg) {
  nn::Model m =
      cfg.model.is_inline ? nn::build_model(config::inline_model_table(cfg)) : nn::load_model_file(cfg.model.file);
  nn::apply_activation_checkpointing(*m.net, cfg.model.activation_checkpointing, cfg.path + ": [model]");
  return m;
}

std::string weights_file(const std::string& checkpoint, bool ema) {
  namespace fs = std::filesystem;
  TR_CHECK(fs::exists(checkpoint), "checkpoint ", checkpoint, ": no such file or directory");
  if (!fs::is_directory(checkpoint)) return checkpoint;
  const std::string w = (fs::path(checkpoint) / (ema ? kEmaFile : "model.safetensors")).string();
  TR_CHECK(fs::exists(w), "checkpoint ", checkpoint, " holds no ",
           ema ? str("EMA weights (", kEmaFile, "); its run had [train] ema_decay = 0")
               : std::string("model.safetensors (expected a checkpoint directory, runs/<name>/checkpoints/step_<N> "
                             "or final, or a .safetensors file)"));
  return w;
}

void load_weights(nn::Module& net, const std::string& file, const std::string& what) {
  try {
    net.load_state_dict(io::load_safetensors(file), true);
  } catch (const Error& e) { throw Error(str(file, " does not fit the model of ", what, ": ", e.what())); }
}

Run::Run(config::RunConfig c, int world_size) : cfg(std::move(c)), env(distributed::read_dist_env()) {
  if (cfg.run.threads > 0) omp_set_num_threads(int(cfg.run.threads));
  device = pick_device(cfg.run.device, env, cfg.path);
  if (device.is_cuda()) cuda::set_device(device.index);  // the rank's GPU, for every launch that names none
  backends::cudnn().benchmark = cfg.run.cudnn_benchmark;
  backends::cudnn().deterministic = cfg.run.deterministic;
  backends::cudnn().allow_tf32 = cfg.run.allow_tf32.value_or(true);
  backends::matmul().allow_tf32 = cfg.run.allow_tf32.value_or(false);
  backends::fusion().enabled = cfg.run.fused_ops;
  backends::fusion().attention = backends::attention_path(cfg.run.attention);
  manual_seed(uint64_t(cfg.run.seed));
  model = build_model(cfg);
  resolve_batching(cfg, world_size > 0 ? world_size : env.world_size, model);
  if (!cfg.model.init.empty()) load_initial_weights(*model.net, cfg);
  freeze_groups(cfg, *model.net);
  // [data]: the dataset's keys and transforms are read here, recorded in cfg.data.resolved
  TomlTable data_table = *cfg.data.table;
  data_table.record_into(cfg.data.resolved);
  data = build_data(cfg, data_table, model);
  std::vector<data::TransformPtr> transforms =
      data::build_transforms(data_table, {model.input.shape, cfg.data.dataset, data.pixel_mean, data.pixel_std});
  data_table.finish();
  loss = build_loss(cfg);
  if (dtype() != DType::F32) model.net->to(dtype());  // torch's model.double()
  if (!device.is_cpu()) model.net->to(device);
  if (env.active()) init_distributed(*this);
  ema = build_ema(*this);  // after DDP's broadcast: every rank averages rank 0's starting weights
  optimizer = build_optimizer(cfg, *model.net);
  scaler = build_scaler(cfg.amp);
  if (ddp && ddp->sharded()) {  // [dist] shard: the optimizer keeps this rank's shard only
    sharded_optimizer = std::make_unique<distributed::ShardedOptimizer>(*optimizer, *ddp);
    scaler.set_found_inf_reducer([this](bool found) { return sharded_optimizer->any(found); });
  }
  loader = build_loader(*this, std::move(transforms));
  const int64_t acc = cfg.train.accumulate;
  steps_per_epoch = (loader->size() + acc - 1) / acc;  // a last, shorter accumulation closes each epoch
  total_steps = cfg.train.steps > 0 ? cfg.train.steps : steps_per_epoch * cfg.train.epochs;
  scheduler = build_scheduler(*this);
}

}  // namespace tr::train
