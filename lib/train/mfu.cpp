#include "train/mfu.h"
#include <omp.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include "core/cuda_hooks.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "data/decode_cache.h"
#include "ops/cpu/sgemm.h"
#include "ops/ops.h"

namespace tr::train {

double measure_matmul_peak(Device d, DType t) {
  const int64_t n = d.is_cpu() ? 1024 : 4096;
  NoGradGuard ng;
  Generator gen(0);  // not the default generator: the run's random stream stays as it was
  Tensor a = randn({n, n}, TensorOptions(DType::F32), &gen).to(d).to(t);
  Tensor b = randn({n, n}, TensorOptions(DType::F32), &gen).to(d).to(t);
  auto wait = [&] {
    if (!d.is_cpu()) cuda::synchronize(d.index);
  };
  double best = 1e30;
  for (int r = 0; r < 4; ++r) {
    wait();
    const auto t0 = std::chrono::steady_clock::now();
    Tensor c = mm(a, b);
    wait();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, s);
  }
  return 2.0 * double(n) * double(n) * double(n) / best;
}

namespace {

// /proc/cpuinfo's first "model name" and a hash of its "flags" (which GEMM kernels run)
std::string cpu_identity() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(f, line)) {
    const auto value = [&] { return line.substr(std::min(line.size(), line.find(':') + 2)); };
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = value();
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = value();
    if (!flags.empty() && model != "unknown CPU") break;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : flags) h = (h ^ c) * 1099511628211ull;
  std::ostringstream o;
  o << model << " (flags " << std::hex << (h >> 32) << ")";
  return o.str();
}

nlohmann::json read_peaks(const std::string& file) {
  std::ifstream f(file);
  if (!f) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();  // damaged: measured again, then rewritten
}

}  // namespace

std::string peak_key(Device d, DType t) {
  // the GEMM's library and kernels: a run held to AVX2 (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE) or on
  // another library (TR_SGEMM) has its own peak
  if (d.is_cpu())
    return str("cpu ", cpu_identity(), ", ", cpu::sgemm_info(), ", ", omp_get_max_threads(), " threads, ",
               dtype_name(t));
  // the description ends with the memory free now, which no peak depends on
  std::string desc = cuda::device_description(d.index);
  const size_t free_part = desc.rfind(" (");
  if (free_part != std::string::npos && desc.ends_with(" free)")) desc.resize(free_part);
  return str(d.str(), " ", desc, ", ", dtype_name(t));
}

std::string default_peaks_file() {
  const std::string root = data::DecodeCache::cache_root();
  return root.empty() ? "" : root + "/peaks.json";
}

namespace {

// Sets file's entry `key`: the file read again just before writing (another run may have added its
// key), then a rename, so that a reader never sees half a file.
void keep_peak(const std::string& file, const std::string& key, double flops) {
  if (file.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(file).parent_path(), ec);
  nlohmann::json peaks = read_peaks(file);
  peaks[key] = flops;
  const std::string tmp = str(file, ".tmp-", ::getpid());
  {
    std::ofstream o(tmp);
    o << peaks.dump(1) << "\n";
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

MatmulPeak matmul_peak(Device d, DType t, const std::string& file) {
  const std::string key = peak_key(d, t);
  if (!file.empty()) {
    const nlohmann::json peaks = read_peaks(file);
    if (peaks.contains(key) && peaks[key].is_number() && peaks[key].get<double>() > 0)
      return {peaks[key].get<double>(), true};
  }
  const double flops = measure_matmul_peak(d, t);
  keep_peak(file, key, flops);
  return {flops, false};
}

double raise_matmul_peak(Device d, DType t, const std::string& file, double old, double achieved, bool measure) {
  const double flops = std::max({old, achieved, measure ? measure_matmul_peak(d, t) : 0.0});
  keep_peak(file, peak_key(d, t), flops);
  return flops;
}

}  // namespace tr::train
