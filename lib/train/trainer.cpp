#include "train/trainer.h"
#include <omp.h>
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include "ops/autocast.h"
#include "core/grad_mode.h"
#include "core/cuda_hooks.h"
#include "core/rng.h"
#include "data/idx_dataset.h"
#include "data/random_crop.h"
#include "data/random_horizontal_flip.h"
#include "data/synthetic_dataset.h"
#include "data/text_dataset.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "optim/clip_grad.h"
#include "optim/scheduler_registry.h"
#include "train/optimizer_setup.h"
#include "train/progress.h"
#include "train/stop_signal.h"
#include "io/checkpoint_dir.h"

namespace tr::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Device pick_device(const std::string& spec) {
  if (spec == "auto") return cuda::is_available() ? Device("cuda") : kCPU;
  return Device(spec);
}

// [data] transforms for per-sample inputs of shape [C, H, W]; a crop's fill is given in pixel
// units and goes through the same normalisation as the pixels.
std::vector<std::shared_ptr<const data::Transform>> make_transforms(const config::DataSection& d, const Shape& sample) {
  std::vector<std::shared_ptr<const data::Transform>> r;
  if (d.transforms.empty()) return r;
  TR_CHECK(sample.size() == 3, "[data] transforms: random_crop and random_horizontal_flip need image samples [C, H, W], but the ",
           d.dataset, " data gives ", sample);
  for (const auto& t : d.transforms) {
    if (t.type == "random_crop") {
      const int64_t h = t.size.empty() ? sample[1] : t.size[0], w = t.size.empty() ? sample[2] : t.size[1];
      TR_CHECK(h == sample[1] && w == sample[2], "[data] transforms: random_crop size [", h, ", ", w,
               "] must equal the model's input size [", sample[1], ", ", sample[2], "]");
      double fill = t.fill;
      if (!d.normalize.empty()) fill = (fill - d.normalize[0]) / d.normalize[1];
      r.push_back(std::make_shared<data::RandomCrop>(h, w, t.padding, float(fill)));
    } else {
      r.push_back(std::make_shared<data::RandomHorizontalFlip>(t.p));
    }
  }
  return r;
}

}  // namespace

Trainer::Trainer(config::RunConfig cfg) : cfg_(std::move(cfg)), env_(distributed::read_dist_env()) {
  if (cfg_.run.threads > 0) omp_set_num_threads(int(cfg_.run.threads));
  device_ = pick_device(cfg_.run.device);
  manual_seed(uint64_t(cfg_.run.seed));

  // data
  const auto& d = cfg_.data;
  if (d.dataset == "idx") {
    std::optional<data::IdxDataset::Normalize> norm;
    if (!d.normalize.empty()) norm = data::IdxDataset::Normalize{float(d.normalize[0]), float(d.normalize[1])};
    train_set_ = std::make_shared<data::IdxDataset>(d.train_images, d.train_labels, norm);
    eval_set_ = std::make_shared<data::IdxDataset>(d.test_images, d.test_labels, norm);
  } else if (d.dataset == "text") {
    data::TextDataset::Options o;
    o.paths = d.paths;
    o.block_size = d.block_size;
    o.eval_fraction = d.eval_fraction;
    auto train = std::make_shared<data::TextDataset>(o);
    o.train = false;
    eval_set_ = std::make_shared<data::TextDataset>(train->corpus(), o);
    train_set_ = train;
  } else {
    data::SyntheticDataset::Options o;
    o.num_classes = d.num_classes;
    o.size = d.train_size;
    o.seed = uint64_t(cfg_.run.seed);
    data::SyntheticDataset probe(o);  // the input shape comes from the model below
    (void)probe;
  }

  // model
  if (cfg_.model.is_inline) {
    TomlTable t(*cfg_.model.inline_model, cfg_.path, "[model]");
    model_ = nn::build_model(t);
  } else {
    model_ = nn::load_model_file(cfg_.model.file);
  }
  if (d.dataset == "synthetic") {
    data::SyntheticDataset::Options o;
    o.input_shape = model_.input.shape;
    o.num_classes = d.num_classes;
    o.size = d.train_size;
    o.seed = uint64_t(cfg_.run.seed);
    train_set_ = std::make_shared<data::SyntheticDataset>(o);
    o.size = d.eval_size;
    o.seed = uint64_t(cfg_.run.seed) + 1000003;
    eval_set_ = std::make_shared<data::SyntheticDataset>(o);
  }
  // the data's per-sample input must be what the model expects
  data::Example ex = train_set_->get(0);
  TR_CHECK(ex.input.sizes() == model_.input.shape, cfg_.path, ": the model expects per-sample input ",
           model_.input.str(), " but the ", d.dataset, " data gives ", ex.input.sizes(),
           d.dataset == "text" ? " (set the model's input to [block_size])" : "");
  if (!device_.is_cpu()) model_.net->to(device_);
  if (env_.active()) init_distributed();

  // optimizer (parameter groups from [[optimizer.groups]])
  std::vector<std::string> warnings;
  optimizer_ = make_optimizer(cfg_, *model_.net, &warnings);
  for (auto& w : warnings) std::fprintf(stderr, "warning: %s: %s\n", cfg_.path.c_str(), w.c_str());

  // mixed precision: autocast in train_step, and the loss scaler
  if (cfg_.amp.enabled) {
    const auto& a = cfg_.amp;
    // No process group for the scaler: DDP has averaged the gradients before unscale_, so an
    // inf/NaN on any rank is on every rank and all ranks skip the same steps without a collective.
    scaler_ = amp::GradScaler({a.init_scale, a.growth_factor, a.backoff_factor, a.growth_interval, a.scaler});
  }

  // the training loader: batch_size samples per micro-batch, `accumulate` micro-batches a step
  data::DataLoaderOptions lo;
  lo.batch_size = d.batch_size;
  lo.shuffle = d.shuffle;
  lo.drop_last = d.drop_last;
  lo.seed = uint64_t(cfg_.run.seed);
  lo.num_workers = int(d.workers);
  // data parallel: batch_size is the global batch; each rank takes its slice of every batch
  lo.world_size = env_.world_size;
  lo.rank = env_.rank;
  TR_CHECK(d.batch_size % env_.world_size == 0, cfg_.path, ": [data] batch_size = ", d.batch_size,
           " is the global batch and must be divisible by the number of ranks (", env_.world_size, ")");
  lo.transforms = make_transforms(d, ex.input.sizes());
  loader_ = std::make_unique<data::DataLoader>(train_set_, lo);
  const int64_t batches = loader_->size(), acc = cfg_.train.accumulate;
  TR_CHECK(batches > 0, cfg_.path, ": the training set (", train_set_->size(), " samples) gives no batch of ",
           lo.batch_size, (lo.drop_last ? " with drop_last" : ""));
  steps_per_epoch_ = (batches + acc - 1) / acc;  // a last, shorter accumulation closes each epoch
  total_steps_ = cfg_.train.steps > 0 ? cfg_.train.steps : steps_per_epoch_ * cfg_.train.epochs;

  // LR scheduler
  if (cfg_.scheduler.enabled()) {
    optim::SchedulerContext sc;
    sc.total_steps = total_steps_;
    sc.steps_per_epoch = steps_per_epoch_;
    sc.epochs = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
    sc.file = cfg_.path;
    scheduler_ = optim::make_scheduler(*cfg_.scheduler.table, *optimizer_, sc);
  }
}

DType Trainer::amp_dtype() const { return cfg_.amp.dtype == "fp16" ? DType::F16 : DType::BF16; }

void Trainer::init_distributed() {
  store_ = distributed::connect_store(env_, &store_server_);
  distributed::ProcessGroupOptions po;
  po.backend = cfg_.dist.backend == "auto" ? (device_.is_cpu() ? "gloo" : "nccl") : cfg_.dist.backend;
  po.rank = env_.rank;
  po.size = env_.world_size;
  po.timeout = std::chrono::milliseconds(int64_t(cfg_.dist.timeout_s * 1000));
  po.prefix = str("run", env_.restart_count);
  po.hostname = env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost" ? "127.0.0.1" : "";
  pg_ = distributed::make_process_group(*store_, po);
  distributed::DDPOptions o;
  o.bucket_mb = cfg_.dist.bucket_mb;
  o.broadcast_buffers = cfg_.dist.broadcast_buffers;
  o.find_unused_parameters = cfg_.dist.find_unused_parameters;
  ddp_ = std::make_unique<distributed::DistributedDataParallel>(*model_.net, *pg_, o);
}

void Trainer::allreduce_sum(std::vector<double>& values) {
  if (!pg_) return;
  Tensor t = from_vector(values, {int64_t(values.size())}, DType::F64);
  pg_->allreduce(t, distributed::ReduceOp::SUM);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t.select(0, int64_t(i)).item();
}

std::pair<Tensor, Tensor> Trainer::loss_and_correct(const Tensor& logits, const Tensor& target) const {
  // classification: [B, C] vs [B]; language model: [B, T, V] vs [B, T] (flattened)
  Tensor lg = logits.dim() > 2 ? logits.reshape({-1, logits.size(-1)}) : logits;
  Tensor tg = target.reshape({-1});
  TR_CHECK(lg.size(0) == tg.size(0), "the model output ", logits.sizes(), " does not match the targets ",
           target.sizes(), " (expected [batch, classes] logits, or [batch, T, vocab] for a language model)");
  Tensor loss = cross_entropy(lg, tg);
  Tensor correct;
  {
    NoGradGuard ng;
    correct = sum(cast(argmax(lg, 1) == tg, DType::I64));
  }
  return {loss, correct};
}

void Trainer::log_line(const std::string& json) {
  if (!cfg_.log.jsonl) return;
  ++metrics_lines_;  // on every rank, so that any rank's count matches rank 0's file
  if (metrics_) {
    std::fputs(json.c_str(), metrics_);
    std::fputc('\n', metrics_);
    std::fflush(metrics_);
  }
}

namespace {

// Keeps the first `lines` lines of a metrics file (what a checkpoint saw) and drops the rest,
// which a resumed run writes again. One truncate(2) at the end of line `lines`: a kill at any
// moment leaves either the old file or the kept lines (rewriting the file could lose them all).
void truncate_lines(const std::string& path, int64_t lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string line;
  int64_t keep = 0;
  for (int64_t i = 0; i < lines && std::getline(in, line); ++i) keep += int64_t(line.size()) + 1;
  in.close();
  const int64_t size = int64_t(fs::file_size(path));
  if (keep > size) keep = size;  // a last line without its newline
  if (keep < size) TR_CHECK(::truncate(path.c_str(), off_t(keep)) == 0, "cannot truncate ", path, " to ", lines, " lines");
}

}  // namespace

EvalResult Trainer::evaluate() {
  NoGradGuard ng;
  model_.net->eval();
  int64_t bs = cfg_.data.eval_batch_size > 0 ? cfg_.data.eval_batch_size : cfg_.data.batch_size;
  data::DataLoaderOptions lo;
  lo.batch_size = bs;
  lo.seed = uint64_t(cfg_.run.seed);
  lo.world_size = env_.world_size;  // each rank scores its slice of every eval batch; sums are reduced
  lo.rank = env_.rank;
  TR_CHECK(bs % env_.world_size == 0, cfg_.path, ": [data] eval_batch_size = ", bs,
           " must be divisible by the number of ranks (", env_.world_size, ")");
  data::DataLoader loader(eval_set_, lo);
  loader.begin_epoch(0);
  double loss_sum = 0;
  int64_t correct = 0, count = 0, batches = 0;
  while (auto b = loader.next()) {
    if (cfg_.train.eval_batches > 0 && batches >= cfg_.train.eval_batches) break;
    ++batches;
    if (!b->input.defined()) continue;  // this rank's slice of a last batch smaller than the world
    Tensor x = b->input.to(device_), y = b->target.to(device_);
    amp::AutocastGuard autocast(device_.type, amp_dtype(), cfg_.amp.enabled);  // the model as it trains
    auto [loss, corr] = loss_and_correct((*model_.net)(x), y);
    int64_t n = y.numel();
    loss_sum += loss.item() * double(n);
    correct += int64_t(corr.item());
    count += n;
  }
  model_.net->train();
  std::vector<double> sums{loss_sum, double(correct), double(count)};
  allreduce_sum(sums);
  loss_sum = sums[0];
  correct = int64_t(sums[1]);
  count = int64_t(sums[2]);
  EvalResult r;
  r.count = count;
  r.loss = count ? loss_sum / double(count) : 0.0;
  r.accuracy = count ? double(correct) / double(count) : 0.0;
  return r;
}

StepResult Trainer::train_step(const std::vector<data::Batch>& micro) {
  // The step's loss is the mean over all N samples of its micro-batches on all ranks:
  //   L = sum_ranks sum_i (n_i / N) * loss_i
  // Each rank back-propagates its terms times world_size (DDP averages the gradients over the
  // ranks), so the gradients equal one batch of N samples in one process. It returns its part of L.
  int64_t global = 0;
  for (auto& b : micro) global += b.global_size;
  const double world = double(env_.world_size);
  optimizer_->zero_grad();
  double loss_part = 0;
  for (size_t i = 0; i < micro.size(); ++i) {
    const data::Batch& b = micro[i];
    TR_CHECK(b.input.defined(), "rank ", env_.rank, " got no samples of batch ", b.index, " (", b.global_size,
             " samples for ", env_.world_size, " ranks); use drop_last = true or a batch size that fills every rank");
    if (ddp_) ddp_->prepare(i + 1 == micro.size());  // gradients are averaged on the last micro-batch
    Tensor x = b.input.to(device_), y = b.target.to(device_);
    Tensor loss;
    {
      amp::AutocastGuard autocast(device_.type, amp_dtype(), cfg_.amp.enabled);  // forward and loss only
      loss = loss_and_correct((*model_.net)(x), y).first;
    }
    const double n = double(x.size(0));
    double lv = loss.item();
    double w = n * world / double(global);
    if (w != 1.0) loss = loss * w;
    scaler_.scale(loss).backward();
    loss_part += lv * n / double(global);
  }
  if (ddp_) ddp_->finish();
  StepResult r;
  r.loss = loss_part;
  const auto& gc = cfg_.train.grad_clip;
  if (gc.value > 0 || gc.max_norm > 0) {
    scaler_.unscale_(*optimizer_);  // clip the true gradients; a no-op without a scaler
    if (!scaler_.found_inf(*optimizer_)) {  // an overflowed step is skipped below, unclipped
      std::vector<Tensor> params = optimizer_->params();
      if (gc.value > 0) optim::clip_grad_value(params, gc.value);
      if (gc.max_norm > 0) r.grad_norm = optim::clip_grad_norm(params, gc.max_norm, gc.norm_type, gc.error_if_nonfinite);
    }
  }
  r.stepped = scaler_.step(*optimizer_);
  scaler_.update();
  // A skipped step leaves the schedule where it was (torch would advance it and warn).
  if (scheduler_ && r.stepped) {
    scheduler_->optimizer_stepped();
    if (scheduler_->interval() == "step") scheduler_->step();
  }
  return r;
}

FitResult Trainer::fit() {
  const bool main = is_main();  // rank 0 writes the run directory; the other ranks only read it
  if (main) {
    fs::create_directories(cfg_.run_dir());
    if (fs::exists(checkpoint_root())) io::clean_temporaries(checkpoint_root());
  }
  TrainPosition pos;
  json resumed;
  if (auto dir = resume_dir()) {
    resumed = restore_checkpoint(*dir);
    pos = {resumed.at("step").get<int64_t>(), resumed.at("epoch").get<int64_t>(), resumed.at("batch").get<int64_t>()};
  }
  if (main) {
    std::ofstream f(cfg_.run_dir() + "/config.toml");
    f << config::to_toml(cfg_);
  }
  const std::string metrics_path = cfg_.run_dir() + "/metrics.jsonl";
  if (!resumed.is_null()) metrics_lines_ = resumed.at("metrics_lines").get<int64_t>();
  if (cfg_.log.jsonl && main) {
    if (!resumed.is_null()) truncate_lines(metrics_path, metrics_lines_);
    metrics_ = std::fopen(metrics_path.c_str(), resumed.is_null() ? "w" : "a");
    TR_CHECK(metrics_, "cannot write ", metrics_path);
  }
  const int64_t epochs = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  const int64_t acc = cfg_.train.accumulate;
  const auto& ck = cfg_.checkpoint;
  Progress progress(main ? cfg_.log.progress : "none", total_steps_, cfg_.train.log_every, pos.step);
  if (!resumed.is_null()) progress.restore_window(resumed.at("progress_window"));
  progress.message(str("run ", cfg_.run.name, ": ", train_set_->describe(), ", ", model_.net->num_parameters(),
                       " parameters, ", cfg_.optimizer.type, " on ", device_.str(), ", ", total_steps_, " steps (",
                       epochs, " epochs of ", steps_per_epoch_, acc > 1 ? str(", ", acc, " micro-batches each") : "",
                       ")", env_.active() ? str(", ", env_.world_size, " ranks (", pg_->backend(), ")") : "",
                       resumed.is_null() ? "" : str("; resumed at step ", pos.step)));

  model_.net->train();
  auto t0 = std::chrono::steady_clock::now();
  int64_t step = pos.step;
  FitResult res;
  auto eval_and_log = [&](int64_t epoch) {
    EvalResult e = evaluate();
    res.last_eval = last_eval_ = e;
    evaluated_since_checkpoint_ = true;
    log_line(str("{\"split\":\"eval\",\"step\":", step, ",\"epoch\":", epoch, ",\"loss\":", json_num(e.loss),
                 ",\"accuracy\":", json_num(e.accuracy), "}"));
    progress.eval(step, epoch, e.loss, e.accuracy);
  };
  auto checkpoint = [&](TrainPosition p) { save_checkpoint(p, progress.window_state()); };

  StopSignal stop;
  std::vector<data::Batch> micro;
  int64_t epoch = pos.epoch;
  bool saved_last = false;  // the newest checkpoint is at the current step
  for (; epoch < epochs && step < total_steps_; ++epoch) {
    loader_->begin_epoch(epoch, epoch == pos.epoch ? pos.batch : 0);
    while (step < total_steps_) {
      micro.clear();
      while (int64_t(micro.size()) < acc) {
        auto b = loader_->next();
        if (!b) break;
        micro.push_back(std::move(*b));
      }
      if (micro.empty()) break;
      const StepResult sr = train_step(micro);
      const double loss_part = sr.loss, norm = sr.grad_norm;
      ++step;
      saved_last = false;
      // one small allreduce a step: the step's loss over all ranks, and whether any rank was
      // signalled (every rank must stop after the same step, or the others would wait in a collective)
      int local_sig = stop.pending();
      std::vector<double> v{loss_part, double(local_sig)};
      allreduce_sum(v);
      const double loss = v[0];
      const int sig = v[1] > 0 ? (local_sig ? local_sig : SIGTERM) : 0;
      TR_CHECK(std::isfinite(loss), "training diverged: the loss is ", loss, " at step ", step, " (epoch ", epoch,
               "); lower [optimizer] lr (now ", optimizer_->lrs()[0], ")");
      int64_t samples = 0;
      for (auto& b : micro) samples += b.global_size;  // all ranks: samples_per_s is the run's throughput
      progress.step(step, epoch, loss, samples, norm);
      std::vector<double> lrs = optimizer_->lrs();
      progress.show(step, epoch, lrs);
      if (progress.log_due(step)) {
        std::string extra;
        if (scaler_.is_enabled())
          extra = str(",\"loss_scale\":", json_num(scaler_.get_scale()), ",\"skipped_steps\":", scaler_.skipped_steps());
        log_line(progress.train_line(step, epoch, lrs, extra));
      }
      // (the last step of an epoch or of the run is evaluated below, once)
      bool epoch_end = loader_->epoch_done();
      if (cfg_.train.eval_every > 0 && step % cfg_.train.eval_every == 0 && !epoch_end && step < total_steps_)
        eval_and_log(epoch);
      if (sig || step == stop_at_step_) {
        checkpoint({step, epoch, loader_->position().batch});
        progress.message(str("stopped ", sig ? str("by signal ", sig) : std::string("as asked"), " at step ", step,
                             "; checkpoint written to ", checkpoint_root(), "/step_", step,
                             " (continue with --resume auto)"));
        res.stopped_by_signal = sig;
        res.stopped_at_step = !sig;
        break;
      }
      if (ck.every > 0 && step % ck.every == 0 && !epoch_end && step < total_steps_) {
        checkpoint({step, epoch, loader_->position().batch});
        saved_last = true;
      }
    }
    if (res.stopped_by_signal || res.stopped_at_step) break;
    bool epoch_complete = loader_->epoch_done();
    eval_and_log(epoch);
    if (!epoch_complete) break;  // the run's step budget ended inside this epoch
    if (scheduler_ && scheduler_->interval() == "epoch") scheduler_->step();
    bool last = step >= total_steps_;
    if (ck.every_epoch || (ck.every > 0 && step % ck.every == 0) || (last && ck.save_final)) {
      checkpoint({step, epoch + 1, 0});
      saved_last = true;
    }
  }
  bool stopped = res.stopped_by_signal || res.stopped_at_step;
  if (!stopped && ck.save_final && !saved_last && step > pos.step)
    checkpoint({step, epoch, loader_->position().batch});
  res.steps = step;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ck.save_final && !stopped && main) {
    std::string dir = cfg_.run_dir() + "/checkpoints/final";
    fs::create_directories(dir);
    io::save_safetensors(dir + "/model.safetensors", model_.net->state_dict(), {{"step", std::to_string(step)}});
  }
  if (metrics_) std::fclose(metrics_);
  metrics_ = nullptr;
  char buf[200];
  std::snprintf(buf, sizeof buf, "done: %lld steps in %.1f s; eval loss %.4f, accuracy %.4f", (long long)step,
                res.seconds, res.last_eval.loss, res.last_eval.accuracy);
  if (!stopped) progress.message(buf);
  return res;
}

void Trainer::load_weights(const std::string& path) {
  auto tensors = io::load_safetensors(path);
  model_.net->load_state_dict(tensors, true);
}

}  // namespace tr::train
