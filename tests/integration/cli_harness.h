// The integration tests' harness: run the real trainer binary (or a shell command) in a fresh
// directory and read what it wrote.
#pragma once
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace it {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

struct Result {
  int code = 0;
  std::string out;  // stdout and stderr together
};

// Runs a shell command in `dir`; captures output and the exit code.
inline Result shell(const fs::path& dir, const std::string& command) {
  std::string cmd = "cd '" + dir.string() + "' && (" + command + ") 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Runs the trainer in `dir` with `args`.
inline Result trainer(const fs::path& dir, const std::string& args) {
  return shell(dir, "'" TRAINER_BINARY "' " + args);
}

inline fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("trainer_it_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline void write(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
}

inline std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline const std::string kRepo = TRAINER_SOURCE_DIR;

// A small synthetic classification run (fast, deterministic): configs/synthetic.toml.
inline const std::string kSyntheticConfig = read(kRepo + "/configs/synthetic.toml");

// kSyntheticConfig without its dropout layer: micro-batches see the forward passes of one batch.
inline std::string synthetic_config_without_dropout() {
  std::string c = kSyntheticConfig;
  c.replace(c.find("[[model.layers]]\ntype = \"dropout\"\np = 0.1\n"), 41, "");
  return c;
}

// metrics.jsonl without its timing fields (samples_per_s, the first train line's startup_s, MFU)
// and the memory figures (a resumed process has not seen the steps before it).
inline std::string strip_timing(const std::string& metrics) {
  const std::string t = std::regex_replace(
      metrics,
      std::regex(
          ",\"(samples_per_s|startup_s|peak_flops|mfu|mem_peak_mb|mem_reserved_mb|mem_peak_reserved_mb)\":[-0-9.e+]+"),
      "");
  return std::regex_replace(t, std::regex(",\"mem_peak_mb_per_rank\":\\[[^\\]]*\\]"), "");
}

// Runs `config` (+ args) straight, then stopped at `stop` and resumed; the metrics (timing aside)
// and the final weights must be identical.
inline void check_exact_resume(const fs::path& d, const std::string& config, const std::string& args, int64_t stop) {
  Result a = trainer(d, "run " + config + " --set run.name=straight " + args);
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b1 =
      trainer(d, "run " + config + " --set run.name=resumed --stop-at-step " + std::to_string(stop) + " " + args);
  INFO(b1.out);
  REQUIRE(b1.code == 0);
  CHECK_THAT(b1.out, Contains("stopped as asked at step " + std::to_string(stop)));
  CHECK(fs::exists(d / ("runs/resumed/checkpoints/step_" + std::to_string(stop)) / "COMPLETE"));
  Result b2 = trainer(d, "run " + config + " --set run.name=resumed --resume auto " + args);
  INFO(b2.out);
  REQUIRE(b2.code == 0);
  CHECK_THAT(b2.out, Contains("resumed at step " + std::to_string(stop)));
  std::string ma = strip_timing(read(d / "runs/straight/metrics.jsonl"));
  std::string mb = strip_timing(read(d / "runs/resumed/metrics.jsonl"));
  CHECK(ma == mb);
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/resumed/checkpoints/final/model.safetensors"));
}

// The values of `key` ("loss", "accuracy", "grad_norm") in the metrics lines of `split`, in order.
inline std::vector<double> metric_values(const std::string& metrics, const std::string& split, const std::string& key) {
  std::vector<double> v;
  std::regex re("\"split\":\"" + split + "\".*\"" + key + "\":([-0-9.e+]+|NaN)");
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, re)) v.push_back(std::stod(m[1].str()));
  }
  return v;
}

// The "lr" arrays of the train lines.
inline std::vector<std::vector<double>> metric_lrs(const std::string& metrics) {
  std::vector<std::vector<double>> out;
  std::regex re("\"split\":\"train\".*\"lr\":\\[([^\\]]*)\\]");
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    std::vector<double> row;
    std::stringstream ss(m[1].str());
    for (std::string x; std::getline(ss, x, ',');) row.push_back(std::stod(x));
    out.push_back(row);
  }
  return out;
}

}  // namespace it
