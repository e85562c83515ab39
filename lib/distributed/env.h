// The distributed environment of one rank, read from the variables torchrun/launch.py define
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus trainer's own
// (TRAINER_STORE_TOKEN, TRAINER_RESTART_COUNT, TRAINER_STORE_HOSTED_BY_LAUNCHER). So a rank runs
// the same whether trainer's launcher, torchrun, a job scheduler or a person started it.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include "distributed/store.h"
#include "distributed/tcp_store.h"

namespace tr::distributed {

struct DistEnv {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  // this rank's node, for messages: torchrun's GROUP_RANK, srun's SLURM_NODEID, else
  // rank / LOCAL_WORLD_SIZE (every node runs as many ranks, as torchrun's nodes do)
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  std::string token;  // empty: the store's token check is off (ranks started by hand)
  int restart_count = 0;
  std::string source = "RANK, WORLD_SIZE";  // which launcher's variables these came from
  bool active() const { return world_size > 1; }
};

// With WORLD_SIZE (torchrun, trainer's launcher, a person): WORLD_SIZE > 1 needs RANK, MASTER_ADDR
// and MASTER_PORT; LOCAL_RANK defaults to RANK and LOCAL_WORLD_SIZE to WORLD_SIZE (one node).
// Without it, a cluster launcher's tasks of more than one: mpirun's (OMPI_COMM_WORLD_RANK / SIZE /
// LOCAL_RANK / LOCAL_SIZE, with MASTER_ADDR and MASTER_PORT given), or srun's (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_TASKS_PER_NODE at SLURM_NODEID; MASTER_ADDR defaulting to
// the first host of SLURM_JOB_NODELIST, MASTER_PORT to 20000 + SLURM_JOB_ID % 20000). Otherwise
// one process. Malformed or inconsistent values are an Error naming the variable and its value.
DistEnv read_dist_env();
// Whether this process is one of several ranks some launcher started (so `trainer run` must not
// launch ranks itself).
bool started_as_rank();
// The first host of a SLURM node list: "gpu[07-09,12],cpu1" -> "gpu07".
std::string first_host(const std::string& nodelist);

// Connects this rank to the run's rendezvous store. With TRAINER_STORE_HOSTED_BY_LAUNCHER=1 the
// launcher serves it; otherwise (ranks started by hand or by another launcher) rank 0 hosts a
// TCPStoreServer on MASTER_ADDR:MASTER_PORT itself, as torch's TCPStore(is_master=True) does, and
// hands it over in *hosted: keep it alive until every rank is done with the store (i.e. until
// after the last barrier). Everyone, rank 0 included, then connects as a client, retrying until
// `timeout`, which also becomes the store's timeout for get/wait.
std::unique_ptr<Store> connect_store(const DistEnv& env, std::unique_ptr<TCPStoreServer>* hosted,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace tr::distributed
