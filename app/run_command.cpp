// `trainer run CONFIG`: trains here, or with --nproc / --nnodes starts the ranks (torchrun's
// options) that each run this same command.
#include <cstdlib>
#include "app/commands.h"
#include "config/run_config.h"
#include "core/cuda_hooks.h"
#include "core/error.h"
#include "distributed/env.h"
#include "distributed/launcher.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

namespace tr::app {

namespace {

void add_launch_options(CLI::App& c, LaunchArgs& a) {
  c.add_option("--nproc", a.nproc,
               "data-parallel ranks to start on this node, or 'gpu' for one per visible GPU ([data] batch_size "
               "is the global batch)");
  c.add_option("--nnodes", a.nnodes, "nodes taking part")->check(CLI::PositiveNumber);
  c.add_option("--node-rank", a.node_rank, "this node's index")->check(CLI::NonNegativeNumber);
  c.add_option("--master-addr", a.master_addr, "address of node 0 (its launcher serves the rendezvous store)");
  c.add_option("--master-port", a.master_port, "port of the rendezvous store (0: a free one, single node)");
  c.add_option("--bind-addr", a.bind_addr,
               "address this node's ranks listen on for the other ranks (default: the one that routes to "
               "--master-addr; or TRAINER_SOCKET_IFNAME=<interface>)");
  c.add_option("--max-restarts", a.max_restarts,
               "restart all ranks (of every node) from the newest checkpoint up to K times")
      ->check(CLI::NonNegativeNumber);
  c.add_option("--join-timeout", a.join_timeout,
               "several nodes: seconds each round waits for every node's launcher (default 600)")
      ->check(CLI::PositiveNumber);
}

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

}  // namespace

void RunCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("run", "train a run config (TOML)");
  config.add_file(*c);
  config.add_overrides(*c);
  c->add_option("--resume", resume,
                "continue from a checkpoint: 'auto' (this run's newest valid one, if any) or a checkpoint directory");
  c->add_option("--stop-at-step", stop_at_step,
                "write a checkpoint and stop after this optimizer step (the schedule still spans the whole run)")
      ->check(CLI::PositiveNumber);
  add_launch_options(*c, launch);
  c->callback([this] { execute(); });
}

void RunCommand::execute() const {
  const bool is_rank = distributed::started_as_rank();  // started by a launcher (ours, torchrun, srun, mpirun)
  const int nproc = nproc_of(launch.nproc);
  if ((nproc > 1 || launch.nnodes > 1) && !is_rank) {
    distributed::LaunchOptions lo;
    lo.nproc = nproc;
    lo.nnodes = launch.nnodes;
    lo.node_rank = launch.node_rank;
    lo.master_addr = launch.master_addr;
    lo.master_port = launch.master_port;
    lo.bind_addr = launch.bind_addr;
    lo.max_restarts = launch.max_restarts;
    lo.join_timeout_s = launch.join_timeout;
    // each rank runs this same command without the launcher's options
    lo.argv = {"trainer", "run"};
    for (const std::string& a : config.args()) lo.argv.push_back(a);
    if (!resume.empty()) lo.argv.insert(lo.argv.end(), {"--resume", resume});
    if (stop_at_step > 0) lo.argv.insert(lo.argv.end(), {"--stop-at-step", std::to_string(stop_at_step)});
    const int status = distributed::launch(lo);
    if (status != 0) throw ExitStatus{status};
    return;
  }
  // a rank that torchrun, srun or mpirun started: --bind-addr reaches it as our launcher passes it
  if (is_rank && !launch.bind_addr.empty()) ::setenv("TRAINER_BIND_ADDR", launch.bind_addr.c_str(), 1);
  train::Trainer t(config.load());
  if (!resume.empty()) t.resume_from(resume);
  if (stop_at_step > 0) t.stop_at_step(stop_at_step);
  train::FitResult r = t.fit();
  if (r.stopped_by_signal) throw ExitStatus{train::StopSignal::exit_status(r.stopped_by_signal)};
}

}  // namespace tr::app
