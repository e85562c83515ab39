// The rank launcher behind `trainer run ... --nproc N` (torchrun --nproc_per_node N, without its
// hangs and orphans). On node 0 it serves the rendezvous store (TCPStoreServer, in a thread), then
// starts nproc ranks of the same binary with the environment of torchrun/launch.py:
//   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//   TRAINER_STORE_TOKEN, TRAINER_STORE_HOSTED_BY_LAUNCHER=1, TRAINER_RESTART_COUNT,
//   OMP_NUM_THREADS = max(1, cores / nproc) unless the user set it (oversubscribed math threads
//   make DDP on a small machine 10-60x slower).
//
// Process model:
// - Each rank runs in its own process group, so a terminal's Ctrl-C reaches the launcher only and
//   the launcher forwards exactly one SIGINT to every rank (not two, as it would if the ranks
//   shared the terminal's group). Signals go to the rank's whole group: helpers it spawned too.
// - Ranks die with the launcher: PR_SET_PDEATHSIG(SIGKILL), so even a SIGKILLed launcher leaves
//   no orphans. (The death signal follows the thread that called launch(): call it from the main
//   thread, or one that outlives the ranks.)
// - Terminal job control (Ctrl-Z) stops the launcher only; a hang-up kills it, and so the ranks.
// - stdin is /dev/null. Rank 0's stdout is the launcher's (unprefixed, still a terminal if it was);
//   other ranks' stdout and every rank's stderr pass through pipes, copied line by line with a
//   "[rank N] " prefix, and the last lines of each stderr are kept for the failure summary.
//
// When a rank fails (non-zero exit or a signal), the others get SIGTERM, then SIGKILL after
// grace_seconds; all are reaped and launch() prints one summary line naming the first failed
// rank and its exit status or signal, followed by the last lines of its stderr. (Of ranks found
// dead at the same moment, one killed by a signal is named first: its peers' errors follow it.) A SIGINT/SIGTERM
// sent to the launcher is forwarded, with the same grace period before SIGKILL (make it long
// enough for a rank to write its checkpoint).
//
// max_restarts K: after a failure the whole group is started again, up to K times, with
// TRAINER_RESTART_COUNT incremented and `--resume auto` appended to argv unless argv already has a
// --resume (so training continues from the newest checkpoint). On one node the store's keys are
// cleared; on several, the launchers agree on each round through the store (node_rendezvous.h:
// a round that failed on any node is left by every node, a launcher started again on a lost node
// joins the next round) and the ranks' keys are namespaced by the round.
//
// Multi-node (nnodes > 1): run one launcher per node with the same master_addr/master_port (a
// fixed port: the other nodes cannot learn a free one) and the same TRAINER_STORE_TOKEN in the
// environment of every launcher (node 0 cannot hand a generated one to the others). Node 0
// serves the store on master_addr. On one node the store listens on 127.0.0.1 only, and the
// token is random per run unless TRAINER_STORE_TOKEN is set.
#pragma once
#include <string>
#include <vector>

namespace tr::distributed {

struct LaunchOptions {
  int nproc = 1;  // ranks on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on node 0 (nnodes == 1 only)
  // The address this node's ranks bind and advertise (TRAINER_BIND_ADDR); "": the one that routes
  // to master_addr (distributed/bind_address.h).
  std::string bind_addr;
  int max_restarts = 0;
  // several nodes: how long a round waits for every node's launcher (torchrun's join_timeout)
  double join_timeout_s = 600;
  // The child's argv (argv[0] first): the same binary with the run arguments minus --nproc etc.
  std::vector<std::string> argv;
  double grace_seconds = 5;
  // What the ranks execute: this binary by default; tests run /bin/sh.
  std::string executable = "/proc/self/exe";
  // Where the ranks' output and the launcher's summary go (tests redirect them to files).
  int out_fd = 1;
  int err_fd = 2;
};

// Runs the group to completion and returns the exit status: 0 when every rank succeeded; after a
// rank failure, the first failed rank's exit status (128 + signal if it was killed); after the
// user's SIGINT/SIGTERM, 130/143 when the ranks stopped on it. Invalid options throw tr::Error.
int launch(const LaunchOptions& opts);

}  // namespace tr::distributed
