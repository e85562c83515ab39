// The subcommands of `trainer`: run, eval, summary, list, checkpoint verify, export, plot, plan, pack,
// info; sample is in app/sample_command.cpp.
#include "app/commands.h"
#include "app/sample_command.h"
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include "config/run_config.h"
#include "core/cuda_hooks.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "data/dataset_registry.h"
#include "data/gpt2_tokenizer.h"
#include "data/idx_dataset.h"
#include "data/image_folder.h"
#include "data/recordio.h"
#include "data/text_dataset.h"
#include "data/token_file.h"
#include "data/transforms.h"
#include "distributed/env.h"
#include "distributed/launcher.h"
#include "io/checkpoint_dir.h"
#include "io/run_plot.h"
#include "io/safetensors.h"
#include "nn/layer_registry.h"
#include "nn/loss.h"
#include "nn/activation_checkpoint.h"
#include "nn/model_file.h"
#include "core/allocator.h"
#include "ops/cpu/blas_info.h"
#include "ops/cpu/sgemm.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cuda_info.h"
#include "ops/init.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "optim/optimizer_registry.h"
#include "optim/scheduler_registry.h"
#include "toml/toml_table.h"
#include "train/gpt2_hf_io.h"
#include "train/plan.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

namespace tr::app {

namespace {

std::string fmt_g9(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void info() {
  std::printf("trainer (C++ tensor + autograd core)\n");
  std::printf("cpu threads: %d (OpenMP pool shared with OpenBLAS and oneDNN)\n", omp_get_max_threads());
  std::printf("cpu blas: %s\n", cpu::blas_info().c_str());
  std::printf("cpu f32 gemm: %s\n", cpu::sgemm_info().c_str());
  std::printf("cpu bf16 matmul: %s\n", cpu::bf16_gemm_name(cpu::bf16_gemm_kernel()));
  std::printf("cuda compiled: %s\n", cuda::is_compiled() ? "yes" : "no");
  std::printf("cuda libraries: %s\n", cuda::cuda_info().c_str());
  int n = cuda::device_count();
  if (n > 0) {
    std::printf("cuda devices: %d\n", n);
    for (int i = 0; i < n; ++i) {
      std::printf("  cuda:%d: %s\n", i, cuda::device_description(i).c_str());
      const MemoryStats m = memory_stats(Device(DeviceType::CUDA, i));  // this process's, as torch.cuda.memory_stats
      std::printf("    allocated %s (peak %s), reserved %s (peak %s)\n", format_bytes(double(m.allocated)).c_str(),
                  format_bytes(double(m.peak_allocated)).c_str(), format_bytes(double(m.reserved)).c_str(),
                  format_bytes(double(m.peak_reserved)).c_str());
      std::printf("    %lld segments, %s free in split segments, %lld of %lld allocations from the cache\n",
                  (long long)m.segments, format_bytes(double(m.inactive_split)).c_str(), (long long)m.cache_hits,
                  (long long)m.num_allocs);
    }
  } else std::printf("cuda devices: 0 (%s)\n", cuda::unavailable_reason().c_str());
}

}  // namespace

// `trainer summary <model file | run config>`
void summary(const std::string& path) {
  toml::table t = parse_toml_file(path);
  nn::Model m;
  if (t.contains("layers")) {
    m = nn::load_model_file(path);
  } else {
    config::RunConfig c = config::load_run_config(path);
    if (c.model.is_inline) {
      m = nn::build_model(config::inline_model_table(c));
    } else {
      m = nn::load_model_file(c.model.file);
    }
    nn::apply_activation_checkpointing(*m.net, c.model.activation_checkpointing, path + ": [model]");
  }
  std::printf("%s", nn::model_summary(m).c_str());
}

struct RunArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string resume;
  int64_t stop_at = 0;
  // data parallel (torchrun's options)
  std::string nproc = "1";  // a count, or "gpu": as many as CUDA devices are visible
  int nnodes = 1, node_rank = 0, master_port = 0, max_restarts = 0;
  std::string master_addr = "127.0.0.1";
  std::string bind_addr;
  double join_timeout = 600;
};

// --nproc N or --nproc gpu (one rank per visible CUDA device, torchrun's --nproc_per_node gpu).
int nproc_of(const std::string& v) {
  if (v == "gpu") {
    const int n = cuda::device_count();
    TR_CHECK(n > 0, "--nproc gpu: no CUDA device is visible (", cuda::unavailable_reason(), ")");
    return n;
  }
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  TR_CHECK(!v.empty() && *end == 0 && n >= 1 && n <= 4096, "--nproc: expected a positive count or 'gpu', got '", v,
           "'");
  return int(n);
}

void run(const RunArgs& a) {
  const bool is_rank = distributed::started_as_rank();  // started by a launcher (ours, torchrun, srun, mpirun)
  const int nproc = nproc_of(a.nproc);
  if ((nproc > 1 || a.nnodes > 1) && !is_rank) {
    distributed::LaunchOptions lo;
    lo.nproc = nproc;
    lo.nnodes = a.nnodes;
    lo.node_rank = a.node_rank;
    lo.master_addr = a.master_addr;
    lo.master_port = a.master_port;
    lo.bind_addr = a.bind_addr;
    lo.max_restarts = a.max_restarts;
    lo.join_timeout_s = a.join_timeout;
    // each rank runs this same command without the launcher's options
    lo.argv = {"trainer", "run", a.config};
    for (auto& s : a.sets) lo.argv.insert(lo.argv.end(), {"--set", s});
    if (!a.resume.empty()) lo.argv.insert(lo.argv.end(), {"--resume", a.resume});
    if (a.stop_at > 0) lo.argv.insert(lo.argv.end(), {"--stop-at-step", std::to_string(a.stop_at)});
    int status = distributed::launch(lo);
    if (status != 0) throw ExitStatus{status};
    return;
  }
  // a rank that torchrun, srun or mpirun started: --bind-addr reaches it as our launcher passes it
  if (is_rank && !a.bind_addr.empty()) ::setenv("TRAINER_BIND_ADDR", a.bind_addr.c_str(), 1);
  train::Trainer t(config::load_run_config(a.config, a.sets));
  if (!a.resume.empty()) t.resume_from(a.resume);
  if (a.stop_at > 0) t.stop_at_step(a.stop_at);
  train::FitResult r = t.fit();
  if (r.stopped_by_signal) throw ExitStatus{train::StopSignal::exit_status(r.stopped_by_signal)};
}

void eval(const std::string& path, const std::string& checkpoint, const std::vector<std::string>& overrides, bool ema) {
  config::RunConfig c = config::load_run_config(path, overrides);
  c.log.progress = "none";
  train::Trainer t(c);
  t.load_weights(train::weights_file(checkpoint, ema));
  train::EvalResult r = t.evaluate();
  std::string accuracy = r.accuracy ? str(",\"accuracy\":", fmt_g9(*r.accuracy)) : "";
  std::printf("{\"split\":\"eval\",\"loss\":%s%s,\"count\":%lld}\n", fmt_g9(r.loss).c_str(), accuracy.c_str(),
              (long long)r.count);
}

namespace {

// One line about an op for `trainer list ops`: arity, kernels, autograd and autocast.
std::string describe_op(const OpDef& d) {
  std::string s = d.num_inputs < 0 ? "variadic" : str(d.num_inputs, d.num_inputs == 1 ? " input" : " inputs");
  if (d.kind == OpKind::View) s += ", view";
  std::string kernels;
  if (d.kernels[int(DeviceType::CPU)]) kernels += "cpu";
  if (d.kernels[int(DeviceType::CUDA)]) kernels += kernels.empty() ? "cuda" : " cuda";
  if (!kernels.empty()) s += ", kernels: " + kernels;
  s += d.backward ? ", differentiable" : d.differentiable ? ", no backward" : ", not differentiable";
  if (d.autocast == amp::CastPolicy::LowerPrecision) s += ", autocast: lower precision";
  if (d.autocast == amp::CastPolicy::Fp32) s += ", autocast: f32";
  if (d.autocast == amp::CastPolicy::Promote) s += ", autocast: promote";
  return s;
}

using ListEntries = std::vector<std::pair<std::string, std::string>>;  // name, doc line

template <typename T, typename Doc>
ListEntries entries_of(Doc doc) {
  ListEntries r;
  for (const auto& [name, e] : Registry<T>::get().all()) r.emplace_back(name, doc(e));
  return r;
}

// Every kind a config can name, with the section or key that names it.
struct Kind {
  const char* name;
  const char* where;
  std::function<ListEntries()> entries;
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"layers", "model files: [[layers]] type", [] { return entries_of<nn::LayerType>([](auto& e) { return e.doc; }); }},
      {"ops", "the core's op registry, not named by configs", [] { return entries_of<OpDef>(describe_op); }},
      {"optimizers", "[optimizer] type", [] { return entries_of<optim::OptimizerType>([](auto& e) { return e.doc(); }); }},
      {"schedulers", "[scheduler] type", [] { return entries_of<optim::SchedulerType>([](auto& e) { return e.doc; }); }},
      {"datasets", "[data] dataset", [] { return entries_of<data::DatasetType>([](auto& e) { return e.doc; }); }},
      {"transforms", "[data] transforms = [{type = ...}]",
       [] { return entries_of<data::TransformType>([](auto& e) { return e.doc; }); }},
      {"losses", "[loss] type", [] { return entries_of<nn::LossType>([](auto& e) { return e.doc; }); }},
  };
  return k;
}

}  // namespace

// `trainer list [kind]`: every registered name of a kind (all kinds without one) with its keys.
void list(const std::string& kind) {
  std::vector<std::string> names;
  for (const auto& k : kinds()) names.push_back(k.name);
  if (!kind.empty() && std::find(names.begin(), names.end(), kind) == names.end()) {
    const std::string near = nearest_name(kind, names);
    throw Error(str("trainer list: unknown kind '", kind, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
                    " (known: ", names, ")"));
  }
  bool first = true;
  for (const auto& k : kinds()) {
    if (!kind.empty() && kind != k.name) continue;
    std::printf("%s%s (%s):\n", first ? "" : "\n", k.name, k.where);
    first = false;
    for (const auto& [name, doc] : k.entries()) std::printf("  %-24s %s\n", name.c_str(), doc.c_str());
  }
}

// One token file: `n` tokens in `format`, or in llm.c's version 2 (uint32) when `wide`.
void write_token_bin(const std::string& path, const uint32_t* tokens, size_t n, const std::string& format, bool wide,
                     const char* kind) {
  const std::vector<uint8_t> bytes = data::write_token_file(std::vector<uint32_t>(tokens, tokens + n),
                                                            wide ? "llmc" : format, wide ? 2 : 1);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  TR_CHECK(f, "trainer pack: cannot write ", path);
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  TR_CHECK(std::fclose(f) == 0 && ok, "trainer pack: cannot write ", path);
  std::printf("wrote %s: %lld %s tokens (%s)\n", path.c_str(), (long long)n, kind, wide ? "llmc v2" : format.c_str());
}

// The token stream's first n_train tokens as the train split, the rest as val: out/train.bin and
// out/val.bin, or with shard_tokens > 0 llm.c's names, out/train_000000.bin, train_000001.bin, ...
// of at most shard_tokens each and out/val_000000.bin (one file), which [data] train =
// "out/train_*.bin" and eval = "out/val_*.bin" read.
void write_token_splits(const std::string& out, const std::vector<uint32_t>& stream, size_t n_train,
                        const std::string& format, bool wide, int64_t shard_tokens, const char* kind) {
  std::filesystem::create_directories(out);
  if (shard_tokens <= 0) {
    write_token_bin(out + "/train.bin", stream.data(), n_train, format, wide, kind);
    write_token_bin(out + "/val.bin", stream.data() + n_train, stream.size() - n_train, format, wide, kind);
    return;
  }
  const auto shard_path = [&](const char* split, size_t k) {
    char name[32];
    std::snprintf(name, sizeof name, "/%s_%06zu.bin", split, k);
    return out + name;
  };
  for (size_t at = 0, k = 0; at < n_train; at += size_t(shard_tokens), ++k)
    write_token_bin(shard_path("train", k), stream.data() + at, std::min(size_t(shard_tokens), n_train - at), format,
                    wide, kind);
  write_token_bin(shard_path("val", 0), stream.data() + n_train, stream.size() - n_train, format, wide, kind);
}

// `trainer pack --tokens out/ [inputs...]`: the bytes of the inputs (the text reader's files and
// order) as byte-level tokens, split as dataset = "text" splits them, into out/train.bin and
// out/val.bin: dataset = "tokens" over them sees exactly the text reader's windows.
void pack_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& format,
                 double eval_fraction, int64_t shard_tokens) {
  data::TextDataset::Options o;
  o.paths = inputs;
  o.block_size = 1;
  o.eval_fraction = eval_fraction;
  data::TextDataset train(o);
  o.train = false;
  [[maybe_unused]] const data::TextDataset eval(train.corpus(), o);  // refuses a val split too short, as the text reader does
  const std::vector<uint32_t> stream(train.corpus()->begin(), train.corpus()->end());
  write_token_splits(out, stream, size_t(train.num_tokens()), format, false, shard_tokens, "byte");
}

// `trainer pack --tokens out/ --tokenizer DIR [inputs...]`: the inputs (files or globs, in order;
// default Debian's fortunes) as GPT-2 BPE tokens, each file one document with <|endoftext|> before
// it (llm.c's data scripts: [eot] + encode_ordinary(doc)); the stream's last
// floor(n * eval_fraction) tokens are val. Vocabularies over 65536 are written as llm.c version 2.
void pack_bpe_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& tokenizer_dir,
                     const std::string& format, double eval_fraction, int64_t shard_tokens) {
  data::GPT2Tokenizer tok(tokenizer_dir);
  const std::vector<std::string> files = data::expand_text_paths(inputs, data::TextDataset::kFortunesGlob);
  std::vector<uint32_t> stream;
  size_t text_bytes = 0;
  double encode_s = 0;
  for (const std::string& file : files) {
    const std::vector<uint8_t> doc = data::TextDataset::read_files({file});
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<uint32_t> ids = tok.encode(std::string_view(reinterpret_cast<const char*>(doc.data()), doc.size()));
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    text_bytes += doc.size();
    stream.push_back(tok.eot_token());
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  // MB = 10^6 bytes of text, the encoding alone (not reading or writing files)
  std::printf("encoded %zu files, %.2f MB, into %zu tokens (vocab %u, <|endoftext|> = %u before each file) in "
              "%.3f s (one thread, PCRE2 %s): %.2f MB/s\n",
              files.size(), double(text_bytes) / 1e6, stream.size(), tok.vocab_size(), tok.eot_token(), encode_s,
              tok.pre_tokenizer().jit() ? "JIT" : "interpreter", double(text_bytes) / 1e6 / std::max(encode_s, 1e-9));
  const size_t n_train = stream.size() - size_t(double(stream.size()) * eval_fraction);
  TR_CHECK(n_train > 0 && n_train < stream.size(), "trainer pack: ", stream.size(), " tokens with eval_fraction ",
           eval_fraction, " leave the train or the val split empty");
  write_token_splits(out, stream, n_train, format, tok.vocab_size() > 65536, shard_tokens, "BPE");
}

// `trainer pack --recordio OUT`: the IDX splits of `dir` as MXNet RecordIO, OUT_train.rec/.idx and
// OUT_test.rec/.idx: one record per image in file order (IRHeader label, id = the image's index,
// the raw u8 pixels), the index's keys those ids.
void pack_recordio(const std::string& out, const std::string& dir) {
  if (auto parent = std::filesystem::path(out).parent_path(); !parent.empty()) std::filesystem::create_directories(parent);
  for (bool train : {true, false}) {
    const data::IdxDataset ds = data::IdxDataset::fashion_mnist(train, std::nullopt, dir);
    const std::string rec = out + (train ? "_train.rec" : "_test.rec"), idx = out + (train ? "_train.idx" : "_test.idx");
    data::RecordIOWriter w(rec, idx);
    const Tensor images = ds.images().contiguous(), labels = ds.labels();
    const int64_t n = ds.size(), row = images.numel() / std::max<int64_t>(n, 1);
    for (int64_t i = 0; i < n; ++i)
      w.write(uint64_t(i), data::pack_image_record(float(labels.data_ptr<int64_t>()[i]), uint64_t(i),
                                                   images.data_ptr<uint8_t>() + i * row, size_t(row)));
    w.close();
    std::printf("wrote %s and %s: %lld images of %lld bytes\n", rec.c_str(), idx.c_str(), (long long)n, (long long)row);
  }
}

// `trainer pack --recordio OUT --folder DIR`: an image folder's files as records (their encoded
// bytes, IRHeader label = the class's index in ImageFolder's sorted order), OUT.rec and OUT.idx.
void pack_recordio_folder(const std::string& out, const std::string& dir) {
  if (auto parent = std::filesystem::path(out).parent_path(); !parent.empty()) std::filesystem::create_directories(parent);
  data::ImageFolderDataset::Options o;
  o.root = dir;
  const data::ImageFolderDataset ds(o);
  const std::string rec = out + ".rec", idx = out + ".idx";
  data::RecordIOWriter w(rec, idx);
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::ifstream f(ds.file(i), std::ios::binary);
    TR_CHECK(f, "trainer pack: cannot read ", ds.file(i));
    const std::vector<uint8_t> img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    w.write(uint64_t(i), data::pack_image_record(float(ds.label(i)), uint64_t(i), img.data(), img.size()));
  }
  w.close();
  std::printf("wrote %s and %s: %lld images of %zu classes\n", rec.c_str(), idx.c_str(), (long long)ds.size(),
              ds.classes().size());
}

// `trainer checkpoint verify <dir>`: sizes, checksums and safetensors headers, without a model.
void checkpoint_verify(const std::string& dir) {
  io::VerifyReport r = io::verify_checkpoint(dir);
  if (!r.ok) throw Error(str("checkpoint ", dir, " is not valid: ", r.message()));
  std::printf("%s: ok (step %lld, %zu files)\n", dir.c_str(), (long long)r.state.value("step", int64_t(0)),
              r.state.value("files", nlohmann::json::object()).size());
}

// `trainer export <checkpoint> <out.safetensors> [--ema]`: the model's weights alone (or the EMA
// weights), PyTorch's names. (--format gpt2_hf: Hugging Face's GPT-2, train/gpt2_hf_io.h.)
void export_weights(const std::string& dir, const std::string& out, bool ema) {
  nlohmann::json state = io::load_checkpoint_state(dir);  // verified first
  io::NamedTensorList tensors = io::load_safetensors(train::weights_file(dir, ema));
  io::save_safetensors(out, tensors, {{"format", "pt"}, {"step", std::to_string(state.value("step", int64_t(0)))}});
  std::printf("wrote %zu tensors of %s%s to %s\n", tensors.size(), dir.c_str(), ema ? " (EMA weights)" : "", out.c_str());
}

void register_commands(CLI::App& app) {
  {
    auto* c = app.add_subcommand("run", "train a run config (TOML)");
    static RunArgs a;
    c->add_option("config", a.config, "run config file")->required()->check(CLI::ExistingFile);
    c->add_option("--set", a.sets, "override a config key: section.key=value (repeatable)");
    c->add_option("--resume", a.resume,
                  "continue from a checkpoint: 'auto' (this run's newest valid one, if any) or a checkpoint directory");
    c->add_option("--stop-at-step", a.stop_at,
                  "write a checkpoint and stop after this optimizer step (the schedule still spans the whole run)")
        ->check(CLI::PositiveNumber);
    c->add_option("--nproc", a.nproc,
                  "data-parallel ranks to start on this node, or 'gpu' for one per visible GPU ([data] batch_size "
                  "is the global batch)");
    c->add_option("--nnodes", a.nnodes, "nodes taking part")->check(CLI::PositiveNumber);
    c->add_option("--node-rank", a.node_rank, "this node's index")->check(CLI::NonNegativeNumber);
    c->add_option("--master-addr", a.master_addr, "address of node 0 (its launcher serves the rendezvous store)");
    c->add_option("--master-port", a.master_port, "port of the rendezvous store (0: a free one, single node)");
    c->add_option("--bind-addr", a.bind_addr,
                  "address this node's ranks listen on for the other ranks (default: the one that routes to "
                  "--master-addr; or TRAINER_SOCKET_IFNAME=<interface>)");
    c->add_option("--max-restarts", a.max_restarts,
                  "restart all ranks (of every node) from the newest checkpoint up to K times")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--join-timeout", a.join_timeout,
                  "several nodes: seconds each round waits for every node's launcher (default 600)")
        ->check(CLI::PositiveNumber);
    c->callback([] { run(a); });
  }
  {
    auto* c = app.add_subcommand("eval", "evaluate saved weights with a run config");
    static std::string cfg, ckpt;
    static std::vector<std::string> sets;
    static bool ema = false;
    c->add_option("config", cfg, "run config file")->required()->check(CLI::ExistingFile);
    c->add_option("--checkpoint", ckpt, "checkpoint directory or model.safetensors")->required();
    c->add_option("--set", sets, "override a config key: section.key=value (repeatable)");
    c->add_flag("--ema", ema, "evaluate the checkpoint directory's EMA weights (ema.safetensors)");
    c->callback([] { eval(cfg, ckpt, sets, ema); });
  }
  {
    auto* c = app.add_subcommand("summary", "print each layer's output shape and parameter count");
    static std::string path;
    c->add_option("file", path, "model file or run config")->required()->check(CLI::ExistingFile);
    c->callback([] { summary(path); });
  }
  {
    auto* c = app.add_subcommand("checkpoint", "inspect checkpoints");
    c->require_subcommand(1);
    auto* v = c->add_subcommand("verify", "check a checkpoint's files (sizes, checksums, headers) without loading a model");
    static std::string dir;
    v->add_option("dir", dir, "checkpoint directory (runs/<name>/checkpoints/step_<N>)")->required();
    v->callback([] { checkpoint_verify(dir); });
  }
  {
    auto* c = app.add_subcommand("export", "write a checkpoint's model weights alone to a safetensors file");
    static std::string dir, out, format = "torch";
    static bool ema = false;
    c->add_option("checkpoint", dir, "checkpoint directory")->required();
    c->add_option("out", out, "output .safetensors file (--format gpt2_hf: a directory)")->required();
    c->add_flag("--ema", ema, "the EMA weights (ema.safetensors; runs with [train] ema_decay > 0) instead of the model's");
    c->add_option("--format", format,
                  "torch: the state_dict by its names; gpt2_hf: a GPT-2 model as Hugging Face's save_pretrained "
                  "writes GPT2LMHeadModel (OUT/model.safetensors and OUT/config.json)")
        ->check(CLI::IsMember({"torch", "gpt2_hf"}));
    c->callback([] {
      if (format == "gpt2_hf") train::gpt2_hf::export_checkpoint(dir, out, ema);
      else export_weights(dir, out, ema);
    });
  }
  {
    std::string kind_names;
    for (const auto& k : kinds()) kind_names += (kind_names.empty() ? "" : ", ") + std::string(k.name);
    auto* c = app.add_subcommand("list", "print every registered name of a kind with the keys it takes");
    static std::string kind;
    c->add_option("kind", kind, kind_names + " (default: all)");
    c->callback([] { list(kind); });
  }
  {
    auto* c = app.add_subcommand("plot", "draw runs' loss, accuracy and lr curves into one HTML (or SVG) file");
    static std::vector<std::string> dirs;
    static std::string out = "plot.html";
    c->add_option("runs", dirs, "run directories (runs/<name>, each with metrics.jsonl)")->required();
    c->add_option("-o,--out", out, "output file: .html (a page, default plot.html) or .svg");
    c->callback([] {
      const auto charts = io::run_charts(dirs);
      io::write_plot(out, "trainer runs", str(dirs.size(), " run(s): ", dirs), charts);
      std::printf("wrote %s (%zu charts of %zu run(s))\n", out.c_str(), charts.size(), dirs.size());
    });
  }
  {
    auto* c = app.add_subcommand("plan", "before training: parameters per group, steps, FLOPs, memory per rank, the LR schedule");
    static std::string cfg, out;
    static std::vector<std::string> sets;
    static int nproc = 1;
    c->add_option("config", cfg, "run config file")->required()->check(CLI::ExistingFile);
    c->add_option("--set", sets, "override a config key: section.key=value (repeatable)");
    c->add_option("--nproc", nproc, "plan for this many data-parallel ranks")->check(CLI::PositiveNumber);
    c->add_option("-o,--out", out, "also write the LR schedule chart: .html or .svg");
    c->callback([] {
      train::Plan p = train::make_plan(config::load_run_config(cfg, sets), nproc);
      std::printf("%s", p.text.c_str());
      if (!out.empty()) {
        io::write_plot(out, "trainer plan: " + cfg, "the learning rate of every param group at every step", p.charts);
        std::printf("wrote %s\n", out.c_str());
      }
    });
  }
  {
    auto* c = app.add_subcommand("pack", "write data files: --tokens (text as token files: bytes, or GPT-2 BPE with "
                                         "--tokenizer) or --recordio (IDX images as MXNet RecordIO)");
    static bool tokens = false, recordio = false;
    static std::string out, format = "nanogpt", from = data::IdxDataset::kFashionMnistDir, tokenizer;
    static std::vector<std::string> inputs;
    static double eval_fraction = 0.1;
    static int64_t shard_tokens = 0;
    auto* tk = c->add_flag("--tokens", tokens, "token files OUT/train.bin and OUT/val.bin: byte-level (the text "
                                               "reader's split), or GPT-2 BPE with --tokenizer");
    auto* rc = c->add_flag("--recordio", recordio, "OUT_train.rec/.idx and OUT_test.rec/.idx from the IDX files in --from");
    tk->excludes(rc);
    c->add_option("--tokenizer", tokenizer, "--tokens: GPT-2 byte-level BPE from DIR/vocab.json and DIR/merges.txt; "
                                            "each input is a document, <|endoftext|> before each")
        ->needs(tk);
    c->add_option("--shard-tokens", shard_tokens, "--tokens: the train split as llm.c's shards of at most N tokens, "
                                                  "OUT/train_000000.bin, ..., and val as OUT/val_000000.bin")
        ->needs(tk)
        ->check(CLI::PositiveNumber);
    c->add_option("--from", from, "--recordio: the directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz "
                                  "(default: Debian's Fashion-MNIST)");
    static std::string folder;
    c->add_option("--folder", folder, "--recordio: an image folder (<class>/<image>) instead: OUT.rec/.idx, the files' "
                                      "PNG or JPEG bytes as they are, the label the class's sorted position");
    c->add_option("out", out, "output directory (--tokens) or path prefix (--recordio)")->required();
    c->add_option("inputs", inputs, "text files or globs, in order (default: Debian's fortunes, as dataset = \"text\")");
    c->add_option("--format", format, "nanogpt (uint16 tokens alone) or llmc (llm.c's 256-int32 header, version 1); "
                                      "a vocabulary over 65536 is always llm.c version 2 (uint32)")
        ->check(CLI::IsMember({"nanogpt", "llmc"}));
    c->add_option("--eval-fraction", eval_fraction, "the corpus's tail written to val.bin")->check(CLI::Range(0.0, 0.99));
    c->callback([] {
      TR_CHECK(tokens || recordio, "trainer pack: say what to write: --tokens or --recordio");
      if (tokens && !tokenizer.empty()) pack_bpe_tokens(out, inputs, tokenizer, format, eval_fraction, shard_tokens);
      else if (tokens) pack_tokens(out, inputs, format, eval_fraction, shard_tokens);
      else if (!folder.empty()) pack_recordio_folder(out, folder);
      else pack_recordio(out, from);
    });
  }
  app.add_subcommand("info", "print build and device information")->callback(info);
  register_sample_command(app);  // app/sample_command.cpp

}

}  // namespace tr::app
