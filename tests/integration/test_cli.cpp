// Integration tests: the real trainer binary on real data, each in a fresh directory.
#include "integration/cli_harness.h"

namespace test_cli {

using namespace it;

TEST_CASE("summary prints every layer with its output shape and the totals", "[integration]") {
  fs::path d = fresh_dir("summary");
  Result r = trainer(d, "summary '" + kRepo + "/models/cnn_fmnist.toml'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("[32, 28, 28]") && Contains("[64, 7, 7]") && Contains("824,650"));
  Result c = trainer(d, "summary '" + kRepo + "/configs/fmnist_mlp.toml'");
  CHECK(c.code == 0);
  CHECK_THAT(c.out, Contains("669,706"));
}

TEST_CASE("the first train line carries startup_s: process start to the first step", "[integration]") {
  fs::path d = fresh_dir("startup_s");
  write(d / "syn.toml", kSyntheticConfig);
  Result a = trainer(d, "run syn.toml --set run.name=a --set train.steps=6 --set train.log_every=2 --stop-at-step 4");
  INFO(a.out);
  REQUIRE(a.code == 0);
  std::string m = read(d / "runs/a/metrics.jsonl");
  INFO(m);
  // after samples_per_s, on the first train line only
  std::regex first(
      "^\\{\"split\":\"train\",\"step\":2,[^\n]*,\"samples_per_s\":[-0-9.e+]+,\"startup_s\":([0-9.e+-]+)\\}\n");
  std::smatch sm;
  REQUIRE(std::regex_search(m, sm, first));
  const double s = std::stod(sm[1].str());
  CHECK(s > 0.0);
  CHECK(s < 60.0);
  CHECK(m.find("startup_s") == m.rfind("startup_s"));
  CHECK_THAT(a.out, !Contains("done:"));  // stopped: no closing line
  // a resumed process logs its own start-up on its first line; the timing-free lines are unchanged
  Result b = trainer(d, "run syn.toml --set run.name=a --set train.steps=6 --set train.log_every=2 --resume auto");
  INFO(b.out);
  REQUIRE(b.code == 0);
  CHECK_THAT(b.out, Contains("s after process start)"));
  std::string m2 = read(d / "runs/a/metrics.jsonl");
  CHECK(std::regex_search(m2, std::regex("\"step\":6,[^\n]*\"startup_s\":[0-9.e+-]+\\}")));
  CHECK(strip_timing(m2).find("startup_s") == std::string::npos);
}

// cuBLAS and cuBLASLt are opened on a CUDA run's first product, not at start-up (loading
// libcublasLt cost each process 0.1 s): a CPU run never loads them. (LD_DEBUG=libs: the loader
// names each library it looks for.)
TEST_CASE("a CPU run and --help load no cuBLAS", "[integration]") {
  fs::path d = fresh_dir("no_cublas");
  write(d / "syn.toml", kSyntheticConfig);
  for (const char* args : {"--help", "run syn.toml --set train.steps=2"}) {
    Result r = shell(d, std::string("LD_DEBUG=libs '" TRAINER_BINARY "' ") + args);
    INFO(args);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Contains("libstdc++"));  // the loader did report its libraries
    CHECK_THAT(r.out, !Contains("libcublas"));
  }
}

TEST_CASE("run writes metrics.jsonl and the resolved config, same seed, same metrics", "[integration]") {
  fs::path d = fresh_dir("determinism");
  write(d / "syn.toml", kSyntheticConfig);
  Result a = trainer(d, "run syn.toml --set run.name=a");
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b = trainer(d, "run syn.toml --set run.name=b");
  REQUIRE(b.code == 0);
  std::string ma = read(d / "runs/a/metrics.jsonl"), mb = read(d / "runs/b/metrics.jsonl");
  CHECK_THAT(ma, Contains("{\"split\":\"train\",\"step\":4,\"epoch\":0,\"loss\":"));
  CHECK_THAT(ma, Contains("\"lr\":[0.1],\"mem_peak_mb\":"));
  // MFU: the synthetic MLP's step FLOPs (8 -> 16 -> 3, batch 32; the input needs no gradient:
  // forward and weight gradients of both layers, the input gradient of the second) and a fraction,
  // from the last train line (the first one's window holds the start-up: its MFU rounds to 0)
  std::smatch mf;
  const std::regex mfu_re(
      "\"flops_per_step\":([0-9.e+]+),\"peak_flops\":([0-9.e+]+),\"mfu\":([0-9.e+]+),\"samples_per_s\":([0-9.e+]+)");
  for (auto it = std::sregex_iterator(ma.begin(), ma.end(), mfu_re); it != std::sregex_iterator(); ++it) mf = *it;
  REQUIRE(mf.size() == 5);
  const double flops = std::stod(mf[1].str()), peak = std::stod(mf[2].str()), mfu = std::stod(mf[3].str());
  CHECK(flops == 2.0 * 32 * (2 * (8 * 16 + 16 * 3) + 16 * 3));
  CHECK(peak > 1e8);
  // mfu = flops x steps/s / peak, rounded to 4 decimals (a loaded machine's may round to 0)
  CHECK(std::abs(mfu - flops * std::stod(mf[4].str()) / 32 / peak) <= 0.00006);
  CHECK(mfu <= 1);  // a kept peak that a run outdoes is measured again and raised
  CHECK_THAT(ma, Contains("{\"split\":\"eval\",\"step\":32,\"epoch\":1,\"loss\":"));
  CHECK(strip_timing(ma) == strip_timing(mb));
  std::string cfg = read(d / "runs/a/config.toml");
  CHECK_THAT(cfg, Contains("seed = 3") && Contains("momentum = 0.9") && Contains("name = 'a'"));
  CHECK(fs::exists(d / "runs/a/checkpoints/final/model.safetensors"));
  // eval of the saved weights reproduces the final eval line
  Result e = trainer(d, "eval syn.toml --checkpoint runs/a/checkpoints/final --set run.name=a");
  INFO(e.out);
  CHECK(e.code == 0);
  std::smatch m;
  REQUIRE(
      std::regex_search(ma, m, std::regex("\"step\":32,\"epoch\":1,\"loss\":([-0-9.e+]+),\"accuracy\":([-0-9.e+]+)")));
  CHECK_THAT(e.out, Contains("\"loss\":" + m[1].str()) && Contains("\"accuracy\":" + m[2].str()));
}

TEST_CASE("progress: a live line on a terminal, plain periodic lines otherwise", "[integration]") {
  fs::path d = fresh_dir("progress");
  write(d / "syn.toml", kSyntheticConfig);
  const std::regex line("epoch 0  step 4/32  loss [0-9.]+  lr 0.1  [0-9]+ samples/s  ETA [0-9:]+");
  // stdout is a pipe here: one plain line per log_every steps, no carriage returns
  Result piped = trainer(d, "run syn.toml --set run.name=piped");
  INFO(piped.out);
  REQUIRE(piped.code == 0);
  CHECK(std::regex_search(piped.out, line));
  CHECK(piped.out.find('\r') == std::string::npos);
  // under a pseudo-terminal (script(1) from bsdutils): one line rewritten in place with \r
  Result tty = shell(d, "script -qec \"'" TRAINER_BINARY "' run syn.toml --set run.name=tty\" /dev/null");
  INFO(tty.out);
  REQUIRE(tty.code == 0);
  CHECK(std::regex_search(tty.out, std::regex("\repoch 1  step 30/32  loss [0-9.]+  lr 0.1 ")));
  // progress = "none": nothing per step
  Result none = trainer(d, "run syn.toml --set run.name=none --set log.progress=none");
  CHECK(none.code == 0);
  CHECK_THAT(none.out, !Contains("samples/s"));
}

TEST_CASE("the MLP learns Fashion-MNIST from the real files", "[integration]") {
  fs::path d = fresh_dir("mlp");
  Result r = trainer(d, "run '" + kRepo +
                            "/configs/fmnist_mlp.toml' --set train.steps=150 --set train.eval_batches=2 "
                            "--set log.progress=lines");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string m = read(d / "runs/fmnist_mlp/metrics.jsonl");
  std::smatch acc;
  REQUIRE(std::regex_search(m, acc, std::regex("\"split\":\"eval\".*\"accuracy\":([0-9.]+)")));
  CHECK(std::stod(acc[1].str()) > 0.7);
}

TEST_CASE("Fashion-MNIST through the decode cache: the same metrics cold, warm, damaged and without", "[integration]") {
  fs::path d = fresh_dir("decode_cache");
  const std::string cache = (d / "cache").string();
  auto run = [&](const std::string& name, const std::string& extra = "") {
    Result r = shell(d, "TRAINER_CACHE_DIR='" + cache + "' '" TRAINER_BINARY "' run '" + kRepo +
                            "/configs/fmnist_mlp.toml' --set train.steps=3 --set train.eval_batches=1 "
                            "--set log.progress=none --set checkpoint.save_final=false --set run.name=" +
                            name + " " + extra);
    INFO(r.out);
    REQUIRE(r.code == 0);
    return std::make_pair(r.out, strip_timing(read(d / "runs" / name / "metrics.jsonl")));
  };
  auto [cold_out, cold] = run("cold");
  CHECK_THAT(cold_out, !Contains("warning"));
  REQUIRE(fs::exists(cache));
  std::vector<fs::path> entries;
  for (auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".decoded") entries.push_back(e.path());  // (peaks.json shares the directory)
  CHECK(entries.size() == 4);                                             // train and test images and labels
  auto [warm_out, warm] = run("warm");
  CHECK_THAT(warm_out, !Contains("warning"));
  CHECK(warm == cold);
  CHECK_THAT(read(d / "runs/warm/config.toml"), Contains("cache = true"));
  // a damaged entry: named in a warning, rebuilt, the run unchanged
  fs::path images;
  for (auto& e : entries)
    if (e.filename().string().rfind("train-images", 0) == 0) images = e;
  REQUIRE(!images.empty());
  fs::resize_file(images, fs::file_size(images) - 784);
  auto [damaged_out, damaged] = run("damaged");
  CHECK_THAT(damaged_out, Contains("warning: dataset cache entry '" + images.string() + "' is damaged"));
  CHECK(damaged == cold);
  auto [again_out, again] = run("again");
  CHECK_THAT(again_out, !Contains("warning"));
  auto [off_out, off] = run("off", "--set data.cache=false");
  CHECK(off == cold);
}

TEST_CASE("bad input: one clear line and a non-zero exit", "[integration][errors]") {
  fs::path d = fresh_dir("errors");
  SECTION("malformed TOML names file, line and column") {
    write(d / "bad.toml", "[run]\nseed = = 3\n");
    Result r = trainer(d, "run bad.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("bad.toml:2:") && Contains("error"));
  }
  SECTION("unknown layer type lists the known types") {
    std::string c = kSyntheticConfig;
    c.replace(c.find("\"relu\""), 6, "\"rellu\"");
    write(d / "c.toml", c);
    Result r = trainer(d, "run c.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("unknown layer type 'rellu'") && Contains("did you mean 'relu'") && Contains("known: "));
  }
  SECTION("unknown key with the nearest valid key") {
    std::string c = kSyntheticConfig;
    c.replace(c.find("momentum"), 8, "momentun");
    write(d / "c.toml", c);
    Result r = trainer(d, "run c.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("c.toml:") && Contains("unknown key 'momentun'") && Contains("did you mean 'momentum'"));
  }
  SECTION("wrong type names the key and the expected type") {
    Result r = trainer(d, "run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.epochs=two");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("'epochs'") && Contains("must be an integer"));
    // a value from --set is named by its argument, not by a place in the file it never was in
    CHECK_THAT(r.out, Contains("error: --set train.epochs=two: [train]"));
    r = trainer(d, "run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.epoch=2");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("--set train.epoch=2: unknown key 'epoch'") && Contains("did you mean 'epochs'"));
    CHECK_THAT(r.out, !Contains(":0:0"));
  }
  SECTION("--version") {
    Result r = trainer(d, "--version");
    CHECK(r.code == 0);
    CHECK(std::regex_search(r.out, std::regex("^trainer [0-9]+\\.[0-9]+\\.[0-9]+\n")));
  }
  SECTION("a shape mismatch between layers names the layer and both shapes") {
    std::string c = kSyntheticConfig;
    c.replace(c.find("out_features = 3"), 16, "out_features = 3\nin_features = 12");
    write(d / "c.toml", c);
    Result r = trainer(d, "run c.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("layer 3 (linear)") && Contains("in_features = 12") && Contains("[16]"));
  }
  SECTION("transforms: an unknown key names the nearest one; non-image data is refused") {
    auto with = [](const std::string& line) {
      std::string c = kSyntheticConfig;
      return c.replace(c.find("batch_size = 32\n"), 16, "batch_size = 32\n" + line + "\n");
    };
    write(d / "c.toml", with("transforms = [{ type = \"random_crop\", paddin = 2 }]"));
    Result r = trainer(d, "run c.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("c.toml:") && Contains("unknown key 'paddin'") && Contains("did you mean 'padding'"));
    write(d / "c.toml", with("transforms = [{ type = \"random_horizontal_flip\" }]"));
    r = trainer(d, "run c.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("[data] transforms") && Contains("[C, H, W]") && Contains("[8]"));
  }
  SECTION("missing dataset file") {
    Result r = trainer(d, "run '" + kRepo + "/configs/fmnist_mlp.toml' --set data.train_images=nope.gz");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("nope.gz"));
  }
  SECTION("truncated dataset file") {
    std::string src = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    std::string data = read(src);
    write(d / "short.gz", data.substr(0, data.size() / 2));
    Result r = trainer(d, "run '" + kRepo + "/configs/fmnist_mlp.toml' --set data.train_labels=short.gz");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("short.gz"));
  }
  SECTION("unknown layer type in a model file") {
    write(d / "m.toml", "input = [4]\n[[layers]]\ntype = \"lineer\"\nout_features = 2\n");
    Result r = trainer(d, "summary m.toml");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("m.toml:3:") && Contains("did you mean 'linear'"));
  }
}

TEST_CASE("TR_SGEMM and TR_CPU_ISA pick kernels: info names them, a bad value is one clear error", "[integration]") {
  fs::path d = fresh_dir("sgemm");
  Result dflt = shell(d, "unset TR_SGEMM; '" TRAINER_BINARY "' info");
  CHECK(dflt.code == 0);
  CHECK_THAT(dflt.out, Contains("cpu f32 gemm: oneDNN "));
  Result ob = shell(d, "TR_SGEMM=openblas '" TRAINER_BINARY "' info");
  CHECK(ob.code == 0);
  CHECK_THAT(ob.out, Contains("cpu f32 gemm: OpenBLAS"));
  Result bad =
      shell(d, "TR_SGEMM=mkl '" TRAINER_BINARY "' run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.steps=1");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("TR_SGEMM=mkl: expected onednn or openblas"));
  // the cap on trainer's own kernels: avx2 takes bf16 matmuls off the native kernels
  Result avx2 = shell(d, "TR_CPU_ISA=avx2 '" TRAINER_BINARY "' info");
  CHECK(avx2.code == 0);
  CHECK_THAT(avx2.out, Contains("cpu bf16 matmul: widened to f32"));
  Result isa = shell(d, "TR_CPU_ISA=sse '" TRAINER_BINARY "' info");
  CHECK(isa.code != 0);
  CHECK_THAT(isa.out, Contains("TR_CPU_ISA=sse: expected avx2 or avx512"));
}

}  // namespace test_cli
