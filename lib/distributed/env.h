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
  std::string master_addr;
  int master_port = 0;
  std::string token;  // empty: the store's token check is off (ranks started by hand)
  int restart_count = 0;
  bool active() const { return world_size > 1; }
};

// Without WORLD_SIZE: one process (the defaults). With it: WORLD_SIZE > 1 needs RANK, MASTER_ADDR and
// MASTER_PORT; LOCAL_RANK defaults to RANK and LOCAL_WORLD_SIZE to WORLD_SIZE (one node).
// Malformed or inconsistent values are an Error naming the variable and its value.
DistEnv read_dist_env();

// Connects this rank to the run's rendezvous store. With TRAINER_STORE_HOSTED_BY_LAUNCHER=1 the
// launcher serves it; otherwise (ranks started by hand or by another launcher) rank 0 hosts a
// TCPStoreServer on MASTER_ADDR:MASTER_PORT itself, as torch's TCPStore(is_master=True) does, and
// hands it over in *hosted: keep it alive until every rank is done with the store (i.e. until
// after the last barrier). Everyone, rank 0 included, then connects as a client, retrying until
// `timeout`, which also becomes the store's timeout for get/wait.
std::unique_ptr<Store> connect_store(const DistEnv& env, std::unique_ptr<TCPStoreServer>* hosted,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace tr::distributed
