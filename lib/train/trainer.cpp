#include "train/trainer.h"
#include <omp.h>
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include "autograd/grad_mode.h"
#include "core/cuda_hooks.h"
#include "core/rng.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"
#include "data/text_dataset.h"
#include "io/safetensors.h"
#include "nn/losses.h"
#include "ops/ops.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace tr::train {

namespace fs = std::filesystem;

namespace {

Device pick_device(const std::string& spec) {
  if (spec == "auto") return cuda::is_available() ? Device("cuda") : kCPU;
  return Device(spec);
}

std::string json_num(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string fmt_duration(double s) {
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

}  // namespace

Trainer::Trainer(config::RunConfig cfg) : cfg_(std::move(cfg)) {
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
    TomlTable t(cfg_.model.inline_model, cfg_.path, "[model]");
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

  // optimizer
  const auto& oc = cfg_.optimizer;
  std::vector<optim::ParamGroup> groups{{model_.net->parameters(), {}, "default"}};
  if (oc.type == "sgd") {
    optim::SGDOptions so;
    so.lr = oc.lr;
    so.momentum = oc.momentum;
    so.dampening = oc.dampening;
    so.weight_decay = oc.weight_decay;
    so.nesterov = oc.nesterov;
    optimizer_ = std::make_unique<optim::SGD>(groups, so);
  } else {
    optim::AdamOptions ao;
    ao.lr = oc.lr;
    ao.beta1 = oc.betas[0];
    ao.beta2 = oc.betas[1];
    ao.eps = oc.eps;
    ao.weight_decay = oc.weight_decay;
    ao.amsgrad = oc.amsgrad;
    optimizer_ = std::make_unique<optim::Adam>(groups, ao, oc.type == "adamw");
  }
}

std::pair<Tensor, Tensor> Trainer::loss_and_correct(const Tensor& logits, const Tensor& target) const {
  // classification: [B, C] vs [B]; language model: [B, T, V] vs [B, T] (flattened)
  Tensor lg = logits.dim() > 2 ? logits.reshape({-1, logits.size(-1)}) : logits;
  Tensor tg = target.reshape({-1});
  TR_CHECK(lg.size(0) == tg.size(0), "the model output ", logits.sizes(), " does not match the targets ",
           target.sizes(), " (expected [batch, classes] logits, or [batch, T, vocab] for a language model)");
  Tensor loss = nn::cross_entropy_loss(lg, tg);
  Tensor correct;
  {
    NoGradGuard ng;
    correct = sum(cast(argmax(lg, 1) == tg, DType::I64));
  }
  return {loss, correct};
}

void Trainer::log_line(const std::string& json) {
  if (metrics_) {
    std::fputs(json.c_str(), metrics_);
    std::fputc('\n', metrics_);
    std::fflush(metrics_);
  }
}

EvalResult Trainer::evaluate() {
  NoGradGuard ng;
  model_.net->eval();
  int64_t bs = cfg_.data.eval_batch_size > 0 ? cfg_.data.eval_batch_size : cfg_.data.batch_size;
  data::DataLoader loader(eval_set_, bs, false, false, uint64_t(cfg_.run.seed));
  loader.begin_epoch(0);
  double loss_sum = 0;
  int64_t correct = 0, count = 0, batches = 0;
  while (auto b = loader.next()) {
    if (cfg_.train.eval_batches > 0 && batches >= cfg_.train.eval_batches) break;
    Tensor x = b->input.to(device_), y = b->target.to(device_);
    Tensor logits = (*model_.net)(x);
    auto [loss, corr] = loss_and_correct(logits, y);
    int64_t n = y.numel();
    loss_sum += loss.item() * double(n);
    correct += int64_t(corr.item());
    count += n;
    ++batches;
  }
  model_.net->train();
  EvalResult r;
  r.count = count;
  r.loss = count ? loss_sum / double(count) : 0.0;
  r.accuracy = count ? double(correct) / double(count) : 0.0;
  return r;
}

FitResult Trainer::fit() {
  fs::create_directories(cfg_.run_dir());
  {
    std::ofstream f(cfg_.run_dir() + "/config.toml");
    f << config::to_toml(cfg_);
  }
  if (cfg_.log.jsonl) {
    metrics_ = std::fopen((cfg_.run_dir() + "/metrics.jsonl").c_str(), "w");
    TR_CHECK(metrics_, "cannot write ", cfg_.run_dir(), "/metrics.jsonl");
  }
  const bool tty = isatty(fileno(stdout));
  const bool live = cfg_.log.progress == "auto" && tty;
  const bool quiet = cfg_.log.progress == "none";

  data::DataLoaderOptions lo;
  lo.batch_size = cfg_.data.batch_size;
  lo.shuffle = cfg_.data.shuffle;
  lo.drop_last = cfg_.data.drop_last;
  lo.seed = uint64_t(cfg_.run.seed);
  lo.num_workers = int(cfg_.data.workers);
  data::DataLoader loader(train_set_, lo);
  const int64_t per_epoch = loader.size();
  TR_CHECK(per_epoch > 0, cfg_.path, ": the training set (", train_set_->size(), " samples) gives no batch of ",
           lo.batch_size, (lo.drop_last ? " with drop_last" : ""));
  const int64_t total_steps = cfg_.train.steps > 0 ? cfg_.train.steps : per_epoch * cfg_.train.epochs;
  const int64_t epochs = (total_steps + per_epoch - 1) / per_epoch;
  if (!quiet)
    std::printf("run %s: %s, %lld parameters, %s on %s, %lld steps (%lld epochs of %lld)\n", cfg_.run.name.c_str(),
                train_set_->describe().c_str(), (long long)model_.net->num_parameters(), cfg_.optimizer.type.c_str(),
                device_.str().c_str(), (long long)total_steps, (long long)epochs, (long long)per_epoch);

  model_.net->train();
  auto t0 = std::chrono::steady_clock::now();
  auto window_t0 = t0;
  int64_t step = 0, window_samples = 0, window_steps = 0;
  double window_loss = 0;
  FitResult res;
  auto eval_and_log = [&](int64_t epoch) {
    EvalResult e = evaluate();
    res.last_eval = e;
    log_line(str("{\"split\":\"eval\",\"step\":", step, ",\"epoch\":", epoch, ",\"loss\":", json_num(e.loss),
                 ",\"accuracy\":", json_num(e.accuracy), "}"));
    if (!quiet) {
      if (live) std::printf("\n");
      std::printf("eval  step %lld  epoch %lld  loss %.4f  accuracy %.4f\n", (long long)step, (long long)epoch, e.loss,
                  e.accuracy);
      std::fflush(stdout);
    }
  };

  for (int64_t epoch = 0; epoch < epochs && step < total_steps; ++epoch) {
    loader.begin_epoch(epoch);
    while (step < total_steps) {
      auto b = loader.next();
      if (!b) break;
      Tensor x = b->input.to(device_), y = b->target.to(device_);
      Tensor logits = (*model_.net)(x);
      auto [loss, corr] = loss_and_correct(logits, y);
      optimizer_->zero_grad();
      loss.backward();
      optimizer_->step();
      ++step;
      double lv = loss.item();
      TR_CHECK(std::isfinite(lv), "training diverged: the loss is ", lv, " at step ", step, " (epoch ", epoch,
               "); lower [optimizer] lr (now ", cfg_.optimizer.lr, ")");
      window_loss += lv;
      window_samples += x.size(0);
      ++window_steps;
      bool log_now = step % cfg_.train.log_every == 0 || step == total_steps;
      auto now = std::chrono::steady_clock::now();
      double wsec = std::chrono::duration<double>(now - window_t0).count();
      double elapsed = std::chrono::duration<double>(now - t0).count();
      double sps = wsec > 0 ? double(window_samples) / wsec : 0.0;
      if (live && (step % 5 == 0 || log_now)) {
        double eta = elapsed / double(step) * double(total_steps - step);
        std::printf("\repoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f samples/s  ETA %s   ", (long long)epoch,
                    (long long)step, (long long)total_steps, window_loss / double(window_steps), optimizer_->lrs()[0],
                    sps, fmt_duration(eta).c_str());
        std::fflush(stdout);
      }
      if (log_now) {
        std::string lrs;
        for (double lr : optimizer_->lrs()) lrs += (lrs.empty() ? "" : ",") + json_num(lr);
        log_line(str("{\"split\":\"train\",\"step\":", step, ",\"epoch\":", epoch, ",\"loss\":",
                     json_num(window_loss / double(window_steps)), ",\"lr\":[", lrs, "],\"samples_per_s\":",
                     json_num(std::round(sps * 10) / 10), "}"));
        if (!live && !quiet) {
          double eta = elapsed / double(step) * double(total_steps - step);
          std::printf("epoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f samples/s  ETA %s\n", (long long)epoch,
                      (long long)step, (long long)total_steps, window_loss / double(window_steps),
                      optimizer_->lrs()[0], sps, fmt_duration(eta).c_str());
          std::fflush(stdout);
        }
        window_loss = 0;
        window_samples = 0;
        window_steps = 0;
        window_t0 = now;
      }
      // (the last step of an epoch or of the run is evaluated below, once)
      if (cfg_.train.eval_every > 0 && step % cfg_.train.eval_every == 0 && !loader.epoch_done() && step < total_steps)
        eval_and_log(epoch);
    }
    eval_and_log(epoch);
  }
  res.steps = step;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cfg_.checkpoint.save_final) {
    std::string dir = cfg_.run_dir() + "/checkpoints/final";
    fs::create_directories(dir);
    io::save_safetensors(dir + "/model.safetensors", model_.net->state_dict(), {{"step", std::to_string(step)}});
  }
  if (metrics_) std::fclose(metrics_);
  metrics_ = nullptr;
  if (!quiet)
    std::printf("done: %lld steps in %.1f s; eval loss %.4f, accuracy %.4f\n", (long long)step, res.seconds,
                res.last_eval.loss, res.last_eval.accuracy);
  return res;
}

void Trainer::load_weights(const std::string& path) {
  auto tensors = io::load_safetensors(path);
  model_.net->load_state_dict(tensors, true);
}

}  // namespace tr::train
