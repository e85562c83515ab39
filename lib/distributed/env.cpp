#include "distributed/env.h"
#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include "core/error.h"

namespace tr::distributed {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

int parse_int(const char* name, const std::string& v, int lo, int hi) {
  int x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  TR_CHECK(!v.empty() && ec == std::errc() && p == v.data() + v.size(), "environment variable ", name, "='", v,
           "' is not an integer");
  TR_CHECK(x >= lo && x <= hi, "environment variable ", name, "=", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

int int_var(const char* name, int fallback, int lo, int hi) {
  auto v = env(name);
  return v ? parse_int(name, *v, lo, hi) : fallback;
}

// The tasks on node `node` of a SLURM_TASKS_PER_NODE list ("2(x3),1": 2 on each of nodes 0-2, 1 on
// node 3); nullopt where the list does not say.
std::optional<int> slurm_tasks_on_node(const std::string& list, int node) {
  int seen = 0;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    int tasks = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &tasks, &repeat) < 1) return std::nullopt;
    if (node < seen + repeat) return tasks;
    seen += repeat;
    at = end + 1;
  }
  return std::nullopt;
}

// srun's task environment as torchrun's: rank, size, local rank and local size, and, where
// MASTER_ADDR / MASTER_PORT are not given, the first host of the job's node list and a port from
// the job id (every task of the job computes the same).
void read_slurm(DistEnv& e) {
  e.source = "srun (SLURM_PROCID, SLURM_NTASKS)";
  e.world_size = parse_int("SLURM_NTASKS", *env("SLURM_NTASKS"), 1, 1 << 20);
  e.rank = parse_int("SLURM_PROCID", *env("SLURM_PROCID"), 0, e.world_size - 1);
  e.local_rank = int_var("SLURM_LOCALID", 0, 0, e.world_size - 1);
  const int node = int_var("SLURM_NODEID", 0, 0, e.world_size - 1);
  e.node_rank = node;
  const auto per_node =
      env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE") : env("SLURM_TASKS_PER_NODE");
  const std::optional<int> here = per_node ? slurm_tasks_on_node(*per_node, node) : std::nullopt;
  e.local_world_size = here ? *here : e.world_size;
  TR_CHECK(e.local_rank < e.local_world_size, "SLURM_LOCALID=", e.local_rank, " is not below the ", e.local_world_size,
           " tasks SLURM_TASKS_PER_NODE gives node ", node);
  e.master_addr = env("MASTER_ADDR").value_or("");
  if (e.master_addr.empty()) {
    const auto nodes = env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
    TR_CHECK(nodes && !nodes->empty(), "srun: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; ",
             "export MASTER_ADDR (the first node's address) in the job script");
    e.master_addr = first_host(*nodes);
  }
  if (auto port = env("MASTER_PORT")) {
    e.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  } else {
    const auto job = env("SLURM_JOB_ID");
    TR_CHECK(job, "srun: neither MASTER_PORT nor SLURM_JOB_ID is set; export MASTER_PORT in the job script");
    e.master_port = 20000 + parse_int("SLURM_JOB_ID", *job, 0, INT32_MAX) % 20000;
  }
}

// mpirun's (Open MPI's) task environment; the rendezvous address is the user's to give.
void read_openmpi(DistEnv& e) {
  e.source = "mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)";
  e.world_size = parse_int("OMPI_COMM_WORLD_SIZE", *env("OMPI_COMM_WORLD_SIZE"), 1, 1 << 20);
  e.rank = parse_int("OMPI_COMM_WORLD_RANK", *env("OMPI_COMM_WORLD_RANK"), 0, e.world_size - 1);
  e.local_world_size = int_var("OMPI_COMM_WORLD_LOCAL_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = int_var("OMPI_COMM_WORLD_LOCAL_RANK", e.rank, 0, e.local_world_size - 1);
  e.node_rank = e.rank / e.local_world_size;
  e.master_addr = env("MASTER_ADDR").value_or("");
  const auto port = env("MASTER_PORT");
  TR_CHECK(!e.master_addr.empty() && port, "mpirun started ", e.world_size,
           " ranks: pass the rendezvous address too, e.g. mpirun -x MASTER_ADDR=<node 0> -x MASTER_PORT=29500");
  e.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
}

}  // namespace

std::string first_host(const std::string& nodelist) {
  // the first entry: up to a comma outside brackets
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    entry += c;
  }
  // each [ranges] becomes its first number, zero padding kept: node[07-09,12] -> node07
  std::string host;
  for (size_t i = 0; i < entry.size(); ++i) {
    if (entry[i] != '[') {
      host += entry[i];
      continue;
    }
    const size_t close = entry.find(']', i);
    TR_CHECK(close != std::string::npos, "SLURM node list '", nodelist, "': unbalanced '['");
    const std::string ranges = entry.substr(i + 1, close - i - 1);
    host += ranges.substr(0, ranges.find_first_of(",-"));
    i = close;
  }
  TR_CHECK(!host.empty(), "SLURM node list '", nodelist, "' names no host");
  return host;
}

bool started_as_rank() {
  if (env("RANK") || env("WORLD_SIZE")) return true;
  if (env("OMPI_COMM_WORLD_SIZE") && env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE") != "1") return true;
  return env("SLURM_PROCID") && env("SLURM_NTASKS") && env("SLURM_NTASKS") != "1";
}

DistEnv read_dist_env() {
  DistEnv e;
  e.restart_count = int_var("TRAINER_RESTART_COUNT", 0, 0, 1 << 30);
  e.token = env("TRAINER_STORE_TOKEN").value_or("");
  auto ws = env("WORLD_SIZE");
  if (!ws) {
    TR_CHECK(!env("RANK"), "environment variable RANK is set but WORLD_SIZE is not: set both (or neither)");
    // no torchrun-style variables: a cluster launcher's, where one started several tasks
    if (started_as_rank()) {
      if (env("OMPI_COMM_WORLD_SIZE") && env("OMPI_COMM_WORLD_RANK"))
        read_openmpi(e);
      else
        read_slurm(e);
      return e;
    }
    return e;  // one process (a single task of either, too)
  }
  e.world_size = parse_int("WORLD_SIZE", *ws, 1, 1 << 20);
  auto rank = env("RANK");
  TR_CHECK(rank || e.world_size == 1, "WORLD_SIZE=", e.world_size, " is set but RANK is not");
  e.rank = rank ? parse_int("RANK", *rank, 0, e.world_size - 1) : 0;
  e.local_world_size = int_var("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = int_var("LOCAL_RANK", e.rank, 0, e.local_world_size - 1);
  e.node_rank = int_var("GROUP_RANK", e.rank / e.local_world_size, 0, e.world_size - 1);
  e.master_addr = env("MASTER_ADDR").value_or("");
  auto port = env("MASTER_PORT");
  if (port) e.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  if (e.active()) {
    TR_CHECK(!e.master_addr.empty(), "WORLD_SIZE=", e.world_size,
             " needs MASTER_ADDR (the address of rank 0's node, where the rendezvous store listens)");
    TR_CHECK(port, "WORLD_SIZE=", e.world_size, " needs MASTER_PORT (the rendezvous store's port)");
  }
  return e;
}

std::unique_ptr<Store> connect_store(const DistEnv& e, std::unique_ptr<TCPStoreServer>* hosted,
                                     std::chrono::milliseconds timeout) {
  TR_CHECK(e.active(), "connect_store: WORLD_SIZE is ", e.world_size, "; a single process needs no store");
  bool by_launcher = env("TRAINER_STORE_HOSTED_BY_LAUNCHER").value_or("") == "1";
  if (!by_launcher && e.rank == 0) {
    TR_CHECK(hosted, "connect_store: rank 0 must host the store but was given nowhere to keep it");
    *hosted = std::make_unique<TCPStoreServer>(e.master_addr, e.master_port, e.token);
  }
  auto store = std::make_unique<TCPStore>(e.master_addr, e.master_port, e.token, timeout);
  store->set_timeout(timeout);
  return store;
}

}  // namespace tr::distributed
