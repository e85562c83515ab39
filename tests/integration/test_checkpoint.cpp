// Checkpoints through the real binary: exact resume (the same metrics lines and byte-identical
// weights as an uninterrupted run), signals, kill -9 during writes, damaged checkpoints, config
// changes on resume, and export.
#include <random>
#include <set>
#include <cstring>
#include "integration/cli_harness.h"

namespace test_checkpoint {

using namespace it;

TEST_CASE("resume is exact: synthetic data, dropout, AdamW, cosine, stops anywhere", "[integration][checkpoint]") {
  fs::path d = fresh_dir("resume_syn");
  std::string c = kSyntheticConfig;
  c.replace(c.find("momentum = 0.9\n"), 15, "");  // SGD's key: AdamW has no momentum (an unknown key)
  write(d / "syn.toml", c + "[scheduler]\ntype = \"cosine\"\ninterval = \"step\"\n");
  const std::string args =
      "--set optimizer.type=adamw --set optimizer.lr=0.01 --set checkpoint.every=7 --set train.epochs=3";
  for (int64_t stop : {5, 16, 21}) {  // mid-epoch, the last step of an epoch, just after a checkpoint
    DYNAMIC_SECTION("stop at step " << stop) {
      fs::remove_all(d / "runs");
      check_exact_resume(d, "syn.toml", args, stop);
    }
  }
}

TEST_CASE("resume is exact: fmnist_cnn (dropout, shuffling, batch norm) stopped mid-epoch",
          "[integration][checkpoint]") {
  fs::path d = fresh_dir("resume_cnn");
  check_exact_resume(d, "'" + kRepo + "/configs/fmnist_cnn.toml'",
                     "--set train.steps=40 --set train.eval_every=20 --set train.eval_batches=2 "
                     "--set train.log_every=5 --set data.eval_batch_size=100",
                     17);
}

TEST_CASE("resume is exact with random crops and flips of the training images", "[integration][checkpoint]") {
  fs::path d = fresh_dir("resume_augment");
  std::string c = read(kRepo + "/configs/fmnist_cnn.toml");
  c.replace(c.find("\"../models/"), 11, "\"" + kRepo + "/models/");
  c.replace(c.find("[data]\n"), 7,
            "[data]\ntransforms = [{ type = \"random_crop\", padding = 3 }, { type = \"random_horizontal_flip\", p = "
            "0.5 }]\n");
  write(d / "aug.toml", c);
  check_exact_resume(d, "aug.toml",
                     "--set train.steps=30 --set train.eval_every=15 --set train.eval_batches=2 "
                     "--set train.log_every=5 --set data.eval_batch_size=100",
                     11);
  CHECK_THAT(read(d / "runs/straight/config.toml"), Contains("type = 'random_horizontal_flip'"));
}

TEST_CASE("resume is exact with fp16 autocast and a loss scaler that grows and backs off",
          "[integration][checkpoint][amp]") {
  fs::path d = fresh_dir("resume_amp");
  write(d / "syn.toml", kSyntheticConfig);
  // growth_interval 3 and a start at 2^20: the scale both backs off and grows within the run
  check_exact_resume(d, "syn.toml",
                     "--set amp.enabled=true --set amp.dtype=fp16 --set amp.scaler.init_scale=1048576.0 "
                     "--set amp.scaler.growth_interval=3 --set train.log_every=1 --set checkpoint.every=5",
                     13);
}

TEST_CASE("resume is exact: gpt_char (AdamW, warmup + cosine LambdaLR) stopped mid-epoch",
          "[integration][checkpoint]") {
  fs::path d = fresh_dir("resume_gpt");
  check_exact_resume(
      d, "'" + kRepo + "/configs/gpt_char.toml'",
      "--set train.steps=24 --set train.eval_every=12 --set train.eval_batches=2 --set train.log_every=4 "
      "--set data.batch_size=8 --set scheduler.type=lambda --set scheduler.interval=step "
      "--set 'scheduler.lambda=\"warmup(step, 8) * cosine(step, total_steps)\"'",
      13);
}

TEST_CASE("EMA of the weights: eval lines gain ema_ keys, training is unchanged, resume is exact, export --ema",
          "[integration][checkpoint][ema]") {
  fs::path d = fresh_dir("resume_ema");
  const std::string cfg = "'" + kRepo + "/configs/fmnist_cnn.toml'";
  const std::string args =
      "--set train.steps=40 --set train.eval_every=20 --set train.eval_batches=2 "
      "--set train.log_every=5 --set data.eval_batch_size=100";
  // fmnist_cnn has batch norm (buffers) and dropout (the random stream the EMA must not disturb)
  check_exact_resume(d, cfg, args + " --set train.ema_decay=0.9", 17);
  CHECK(read(d / "runs/straight/checkpoints/final/ema.safetensors") ==
        read(d / "runs/resumed/checkpoints/final/ema.safetensors"));
  CHECK(fs::exists(d / "runs/resumed/checkpoints/step_17/ema.safetensors"));
  const std::string m = read(d / "runs/straight/metrics.jsonl");
  std::vector<double> ema_acc = metric_values(m, "eval", "ema_accuracy"), acc = metric_values(m, "eval", "accuracy");
  CHECK(metric_values(m, "eval", "ema_loss").size() == 2);
  REQUIRE(ema_acc.size() == 2);
  CHECK(ema_acc != acc);

  // the model trains on the same numbers as without EMA: the metrics differ by the ema_ keys only
  Result plain = trainer(d, "run " + cfg + " --set run.name=plain --set train.ema_decay=0 " + args);
  INFO(plain.out);
  REQUIRE(plain.code == 0);
  const std::regex ema_keys(",\"ema_loss\":[-0-9.e+]+,\"ema_accuracy\":[-0-9.e+]+");
  CHECK(strip_timing(std::regex_replace(m, ema_keys, "")) == strip_timing(read(d / "runs/plain/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/plain/checkpoints/final/model.safetensors"));

  // export --ema writes the EMA weights (the model's names); trainer eval --ema scores them as the run did
  Result e = trainer(d, "export runs/straight/checkpoints/final ema_w.safetensors --ema");
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK_THAT(e.out, Contains("(EMA weights)"));
  REQUIRE(trainer(d, "export runs/straight/checkpoints/final model_w.safetensors").code == 0);
  const std::string ew = read(d / "ema_w.safetensors"), mw = read(d / "model_w.safetensors");
  CHECK(ew.size() == mw.size());  // the same names, dtypes and shapes ...
  CHECK(ew != mw);                // ... other values
  Result ev = trainer(d, "eval " + cfg + " --checkpoint runs/straight/checkpoints/final --ema " + args);
  INFO(ev.out);
  REQUIRE(ev.code == 0);
  CHECK(metric_values(ev.out, "eval", "accuracy").at(0) == Approx(ema_acc.back()).epsilon(1e-9));
  Result none = trainer(d, "export runs/plain/checkpoints/final x.safetensors --ema");
  CHECK(none.code != 0);
  CHECK_THAT(none.out, Contains("holds no EMA weights") && Contains("ema_decay"));

  // a run with EMA does not resume a checkpoint without it
  Result bad = trainer(d, "run " + cfg + " --set run.name=plain --resume auto " + args);
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("train.ema_decay"));
  CHECK_THAT(trainer(d, "run " + cfg + " --set train.ema_decay=1").out, Contains("ema_decay") && Contains("[0, 1)"));
}

TEST_CASE("SIGTERM writes a checkpoint and exits 143, the resumed run equals an uninterrupted one",
          "[integration][checkpoint]") {
  fs::path d = fresh_dir("sigterm");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string args = "--set train.epochs=400 --set train.log_every=1 --set checkpoint.every_epoch=false";
  Result a = trainer(d, "run syn.toml --set run.name=straight " + args);
  REQUIRE(a.code == 0);
  // stop it once it has logged a few steps
  Result b = shell(
      d, "'" TRAINER_BINARY "' run syn.toml --set run.name=sig " + args +
             " > sig.log 2>&1 & pid=$!; "
             "while [ \"$(cat runs/sig/metrics.jsonl 2>/dev/null | grep -c train)\" -lt 50 ]; do sleep 0.01; done; "
             "kill -TERM $pid; wait $pid; echo \"status $?\"");
  INFO(b.out << read(d / "sig.log"));
  CHECK_THAT(b.out, Contains("status 143"));
  CHECK_THAT(read(d / "sig.log"), Contains("stopped by signal 15"));
  Result c = trainer(d, "run syn.toml --set run.name=sig --resume auto " + args);
  INFO(c.out);
  REQUIRE(c.code == 0);
  CHECK(strip_timing(read(d / "runs/straight/metrics.jsonl")) == strip_timing(read(d / "runs/sig/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/sig/checkpoints/final/model.safetensors"));
}

TEST_CASE("kill -9 during checkpoint writes: --resume auto always continues from a complete one",
          "[integration][checkpoint]") {
  fs::path d = fresh_dir("kill9");
  write(d / "syn.toml", kSyntheticConfig);
  // a checkpoint after every step, so most kills land inside a write
  const std::string args =
      "--set train.epochs=100 --set checkpoint.every=1 --set checkpoint.keep_last=2 --set log.progress=none";
  Result a = trainer(d, "run syn.toml --set run.name=straight " + args);
  REQUIRE(a.code == 0);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> delay_ms(30, 400);
  int kills = 0;
  for (int i = 0; i < 20; ++i) {
    Result k = shell(d, "'" TRAINER_BINARY "' run syn.toml --set run.name=killed --resume auto " + args +
                            " > kill.log 2>&1 & pid=$!; sleep " + std::to_string(delay_ms(rng) / 1000.0) +
                            "; kill -9 $pid 2>/dev/null && echo killed; wait $pid; grep -c error kill.log; true");
    INFO("attempt " << i << ": " << k.out << read(d / "kill.log"));
    CHECK_THAT(k.out, !Contains("\n1\n"));  // no error from the resumed run before it was killed
    if (k.out.find("killed") != std::string::npos) ++kills;
  }
  CHECK(kills >= 15);
  Result last = trainer(d, "run syn.toml --set run.name=killed --resume auto " + args);
  INFO(last.out);
  REQUIRE(last.code == 0);
  CHECK(strip_timing(read(d / "runs/straight/metrics.jsonl")) == strip_timing(read(d / "runs/killed/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/killed/checkpoints/final/model.safetensors"));
}

TEST_CASE("a damaged newest checkpoint: verify names it, --resume auto falls back with a warning",
          "[integration][checkpoint][errors]") {
  fs::path d = fresh_dir("damaged");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string args = "--set checkpoint.every=5 --set checkpoint.keep_last=0";
  REQUIRE(trainer(d, "run syn.toml --stop-at-step 12 " + args).code == 0);
  fs::path newest = d / "runs/syn/checkpoints/step_12";
  {  // flip a byte inside the optimizer state
    std::fstream f(newest / "optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  Result v = trainer(d, "checkpoint verify runs/syn/checkpoints/step_12");
  CHECK(v.code != 0);
  CHECK_THAT(v.out, Contains("optimizer.safetensors") && Contains("crc32"));
  CHECK(trainer(d, "checkpoint verify runs/syn/checkpoints/step_10").code == 0);
  Result r = trainer(d, "run syn.toml --resume auto " + args);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("warning") && Contains("step_12") && Contains("resumed at step 10"));
  Result explicit_bad = trainer(d, "run syn.toml --resume runs/syn/checkpoints/step_12 " + args);
  CHECK(explicit_bad.code != 0);
}

TEST_CASE("resume refuses config changes that alter the run and lists harmless ones",
          "[integration][checkpoint][errors]") {
  fs::path d = fresh_dir("resume_config");
  write(d / "syn.toml", kSyntheticConfig);
  REQUIRE(trainer(d, "run syn.toml --stop-at-step 10").code == 0);
  Result bad = trainer(d, "run syn.toml --resume auto --set optimizer.lr=0.2 --set data.batch_size=16");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("optimizer.lr: 0.1 -> 0.2") && Contains("data.batch_size: 32 -> 16"));
  Result ok = trainer(d, "run syn.toml --resume auto --set train.log_every=2");
  INFO(ok.out);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Contains("train.log_every: 4 -> 2") && Contains("resumed at step 10"));
}

TEST_CASE("export writes the weights alone, as the PyTorch-checked fixture", "[integration][checkpoint]") {
  fs::path d = fresh_dir("export");
  Result r = trainer(d, "run '" + kRepo + "/tests/fixtures/export_run.toml' --set log.progress=none");
  INFO(r.out);
  REQUIRE(r.code == 0);
  Result e = trainer(d, "export runs/export_run/checkpoints/step_30 w.safetensors");
  INFO(e.out);
  REQUIRE(e.code == 0);
  // The header (names, dtypes, shapes, offsets, metadata) byte for byte; the f32 weights to
  // rounding: the fixture's 30 steps ran on another CPU, whose BLAS kernels round differently.
  const std::string ours = read(d / "w.safetensors"),
                    fixture = read(kRepo + "/tests/fixtures/export_weights.safetensors");
  REQUIRE(ours.size() == fixture.size());
  uint64_t header = 0;
  std::memcpy(&header, fixture.data(), 8);
  REQUIRE(8 + header <= fixture.size());
  CHECK(ours.substr(0, 8 + header) == fixture.substr(0, 8 + header));
  const size_t n = (fixture.size() - 8 - header) / 4;
  std::vector<float> a(n), b(n);
  std::memcpy(a.data(), ours.data() + 8 + header, n * 4);
  std::memcpy(b.data(), fixture.data() + 8 + header, n * 4);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !(std::abs(a[i] - b[i]) <= 1e-4f * (1.0f + std::abs(b[i])));
  CHECK(bad == 0);
}

TEST_CASE("keep_last prunes old checkpoints and keep_best keeps the best eval's", "[integration][checkpoint]") {
  fs::path d = fresh_dir("keep_best");
  write(d / "syn.toml", kSyntheticConfig);
  Result r = trainer(d,
                     "run syn.toml --set train.epochs=6 --set checkpoint.keep_last=1 "
                     "--set checkpoint.keep_best=eval.loss --set log.progress=none");
  INFO(r.out);
  REQUIRE(r.code == 0);
  // the epoch-end checkpoints are step_16, step_32, ...; the best is the one after the lowest eval loss
  std::string m = read(d / "runs/syn/metrics.jsonl");
  std::regex re("\"split\":\"eval\",\"step\":([0-9]+),\"epoch\":[0-9]+,\"loss\":([-0-9.e+]+)");
  int64_t best_step = 0;
  double best = 1e300;
  for (std::sregex_iterator it(m.begin(), m.end(), re), end; it != end; ++it)
    if (std::stod((*it)[2].str()) < best) {
      best = std::stod((*it)[2].str());
      best_step = std::stoll((*it)[1].str());
    }
  std::set<std::string> kept;
  for (auto& e : fs::directory_iterator(d / "runs/syn/checkpoints"))
    if (e.path().filename().string().rfind("step_", 0) == 0) kept.insert(e.path().filename().string());
  std::set<std::string> want{"step_96", "step_" + std::to_string(best_step)};
  CHECK(kept == want);
}

TEST_CASE("one run, one writer: a second run on a live run's directory is refused, a killed one leaves no lock",
          "[integration][checkpoint][errors]") {
  fs::path d = fresh_dir("run_lock");
  write(d / "syn.toml", kSyntheticConfig);
  // a run that lasts: many epochs of the synthetic set, a checkpoint every 20 steps
  const std::string slow =
      "run syn.toml --set run.name=locked --set train.epochs=100000 --set checkpoint.every=20 "
      "--set log.progress=none";
  Result r = shell(d, "'" TRAINER_BINARY "' " + slow +
                          " > first.log 2>&1 & pid=$!; "
                          "for i in $(seq 100); do [ -d runs/locked/checkpoints/step_20 ] && break; sleep 0.1; done; "
                          "'" TRAINER_BINARY
                          "' run syn.toml --set run.name=locked --set train.epochs=1; rc=$?; "
                          "kill -9 $pid; wait $pid; echo second=$rc first_pid=$pid");
  INFO(r.out);
  CHECK_THAT(r.out, Contains("second=1"));
  CHECK_THAT(r.out, Contains("run directory runs/locked is in use by trainer pid") && Contains("one run, one writer"));
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("first_pid=([0-9]+)")));
  CHECK_THAT(r.out, Contains("trainer pid " + m[1].str() + " on "));
  // the killed run's lock went with it: the run resumes
  Result again = trainer(d, "run syn.toml --set run.name=locked --set train.epochs=1 --resume auto");
  INFO(again.out);
  CHECK(again.code == 0);
}

TEST_CASE("a checkpoint that cannot be written: exit status 4 naming it and the cause, earlier ones intact, resume",
          "[integration][checkpoint][errors]") {
  fs::path d = fresh_dir("full_disk");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string run = "'" TRAINER_BINARY
                          "' run syn.toml --set train.steps=60 --set checkpoint.every=5 "
                          "--set checkpoint.keep_last=0 --set log.progress=none";
  // the run without faults, to compare the resumed one with
  Result straight = shell(d, run + " --set run.name=straight");
  REQUIRE(straight.code == 0);
  SECTION("a file size limit (EFBIG): works without privileges") {
    // ulimit -f 2: 1 KiB per file in sh (512-byte blocks): the model (1,052 bytes) is over it
    Result r = shell(d, "ulimit -f 2; " + run + " --set run.name=fsize");
    INFO(r.out);
    CHECK(r.code == 4);
    CHECK_THAT(r.out, Contains("cannot write checkpoint step_5 of run fsize") && Contains("model.safetensors") &&
                          Contains("File too large") && Contains("none yet"));
    CHECK_FALSE(fs::exists(d / "runs/fsize/checkpoints/step_5"));
    for (auto& e : fs::directory_iterator(d / "runs/fsize/checkpoints"))  // no temporary left behind
      CHECK(e.path().filename().string().rfind(".tmp", 0) != 0);
  }

  SECTION("a full disk (ENOSPC) and a read-only checkpoint directory (EROFS), on a small tmpfs") {
    // a private mount namespace: the tmpfs exists for this shell only
    const std::string probe = "unshare -m sh -c 'mkdir -p m && mount -t tmpfs -o size=64k tmpfs m' 2>&1";
    if (shell(d, probe).code != 0) {
      WARN("skipped: no mount namespace here (unshare -m and mount need CAP_SYS_ADMIN); the EFBIG section ran");
      return;
    }
    fs::create_directories(d / "disk");
    const std::string script =
        "mount -t tmpfs -o size=120k tmpfs disk && cd disk && cp ../syn.toml . && "
        // 1. the disk fills up at the 6th checkpoint
        + run +
        " --set run.name=full; echo status=$?; "
        "'" TRAINER_BINARY
        "' checkpoint verify runs/full/checkpoints/step_25 && "
        "wc -l < runs/full/metrics.jsonl | sed 's/^/lines=/'; grep -vc '}$' runs/full/metrics.jsonl | sed 's/^/cut=/'; "
        // 2. warn: the run trains on past the failed checkpoints
        "rm -rf runs/full/checkpoints/step_5 runs/full/checkpoints/step_10; " +
        run +
        " --set run.name=warned --set checkpoint.on_error=warn 2>&1 | grep -c 'training goes on' | sed 's/^/warned=/'; "
        "ls runs/warned/checkpoints | tr '\\n' ' ' | sed 's/^/warned_dirs=/'; echo; rm -rf runs/warned; "
        // 3. space freed: --resume auto continues from the last good one to the end
        "mount -o remount,size=8m \"$PWD\"; " +
        run +
        " --set run.name=full --resume auto; echo resumed=$?; "
        "cp runs/full/metrics.jsonl ../full_metrics.jsonl; cp runs/full/checkpoints/final/model.safetensors "
        "../full_final.safetensors; "
        // 4. a read-only checkpoint directory under a writable run directory
        + run +
        " --set run.name=ro --set train.steps=10 > /dev/null && "
        "mount --bind runs/ro/checkpoints runs/ro/checkpoints && mount -o remount,bind,ro runs/ro/checkpoints && " +
        run + " --set run.name=ro --set train.steps=20 --resume auto; echo ro_status=$?";
    write(d / "disk.sh", script + "\n");
    Result r = shell(d, "unshare -m sh disk.sh");
    INFO(r.out);
    CHECK_THAT(r.out, Contains("status=4"));
    CHECK_THAT(r.out, Contains("cannot write checkpoint step_30 of run full") && Contains("No space left on device") &&
                          Contains("the earlier checkpoints are intact (newest: step_25)"));
    CHECK_THAT(r.out, Contains("runs/full/checkpoints/step_25: ok"));
    // the train lines up to step 30 and the first epoch's eval, whole. Checkpoints are written in the
    // background: step 30's failure is seen at the first step that finds its write ended, at the latest
    // by step 32's checkpoint (one write in flight), after step 32's train and eval lines.
    CHECK_THAT(r.out, Contains("lines=8\n") || Contains("lines=10\n"));
    CHECK_THAT(r.out, Contains("cut=0\n"));
    CHECK_THAT(r.out, Contains("warned=") && !Contains("warned=0"));
    CHECK_THAT(r.out, Contains("resumed=0"));
    CHECK(strip_timing(read(d / "full_metrics.jsonl")) == strip_timing(read(d / "runs/straight/metrics.jsonl")));
    CHECK(read(d / "full_final.safetensors") == read(d / "runs/straight/checkpoints/final/model.safetensors"));
    CHECK_THAT(r.out, Contains("ro_status=4") && Contains("Read-only file system") &&
                          Contains("cannot write checkpoint step_15 of run ro"));
  }
}

}  // namespace test_checkpoint
