// The subcommands of the trainer binary, one struct each: its options as members (CLI11 writes
// into them while parsing, then calls execute) and, in app/<name>_command.cpp, their declaration
// and what the command does.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "app/config_options.h"

namespace tr::app {

// Thrown by a command that ends without an error but with a non-zero status (a run stopped by
// SIGINT exits 130 after its checkpoint); main returns `status`.
struct ExitStatus {
  int status;
};

// torchrun's options for a data-parallel run.
struct LaunchArgs {
  std::string nproc = "1";  // a count, or "gpu": as many as CUDA devices are visible
  int nnodes = 1, node_rank = 0, master_port = 0, max_restarts = 0;
  std::string master_addr = "127.0.0.1";
  std::string bind_addr;
  double join_timeout = 600;
};

struct RunCommand {
  RunConfigOptions config;
  std::string resume;
  int64_t stop_at_step = 0;
  LaunchArgs launch;
  void add_to(CLI::App& app);
  void execute() const;
};

struct EvalCommand {
  RunConfigOptions config;
  std::string checkpoint;
  bool ema = false;
  void add_to(CLI::App& app);
  void execute() const;
};

struct SummaryCommand {
  std::string file;
  void add_to(CLI::App& app);
  void execute() const;
};

struct CheckpointVerifyCommand {  // `trainer checkpoint verify`
  std::string dir;
  void add_to(CLI::App& app);
  void execute() const;
};

struct ExportCommand {
  std::string checkpoint, out, format = "torch";
  bool ema = false;
  void add_to(CLI::App& app);
  void execute() const;
};

struct ListCommand {
  std::string kind;  // empty: every kind
  void add_to(CLI::App& app);
  void execute() const;
};

struct PlotCommand {
  std::vector<std::string> runs;
  std::string out = "plot.html";
  void add_to(CLI::App& app);
  void execute() const;
};

struct PlanCommand {
  RunConfigOptions config;
  int nproc = 1;
  std::string out;
  void add_to(CLI::App& app);
  void execute() const;
};

struct PackCommand {
  bool tokens = false, recordio = false;
  std::string out;
  std::vector<std::string> inputs;
  // --tokens
  std::string format = "nanogpt", tokenizer;
  double eval_fraction = 0.1;
  int64_t shard_tokens = 0;
  // --recordio
  std::string from, folder;
  PackCommand();  // `from`'s default is the data floor's Fashion-MNIST directory
  void add_to(CLI::App& app);
  void execute() const;
};

struct InfoCommand {
  void add_to(CLI::App& app);
  void execute() const;
};

struct SampleCommand {
  RunConfigOptions config;
  std::string checkpoint, prompt, tokenizer;
  int64_t max_new_tokens = 200;
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;
  std::optional<uint64_t> seed;
  bool no_cache = false;
  void add_to(CLI::App& app);
  void execute() const;
};

// One of each subcommand, added to the app in the order `trainer --help` lists them. CLI11 keeps
// pointers to the members, so Commands lives as long as the parse and never moves.
struct Commands {
  RunCommand run;
  EvalCommand eval;
  SummaryCommand summary;
  CheckpointVerifyCommand checkpoint_verify;
  ExportCommand export_;
  ListCommand list;
  PlotCommand plot;
  PlanCommand plan;
  PackCommand pack;
  InfoCommand info;
  SampleCommand sample;

  explicit Commands(CLI::App& app);
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;
};

}  // namespace tr::app
