// The launchers of a multi-node run agree on rounds through the rendezvous store (torchelastic's
// agent rendezvous, reduced to what --max-restarts needs): round r's ranks use the store prefix
// run<r>, every node's launcher joins a round before starting its ranks, and a round that failed
// anywhere is left by every node and followed by round r + 1 (its ranks resume from the newest
// checkpoint). A launcher started again on a node that was lost (the node back) joins the current
// round; when its node already belonged to that round, the round lost that node and it starts the
// next. Keys, under "launch/": "round" (the newest round), "round<r>/node<i>" (node i joined r),
// "round<r>/failed" (r ended with a failure somewhere), "done" (a node's ranks all succeeded: no
// more rounds).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include "core/error.h"
#include "distributed/store.h"

namespace tr::distributed {

class NodeRendezvous {
 public:
  // `store`: a connection of the launcher's own, at `address` (for messages); `timeout`: how long
  // a round waits for every node.
  NodeRendezvous(std::unique_ptr<Store> store, std::string address, int node_rank, int nnodes,
                 std::chrono::milliseconds timeout);

  // The round this launcher starts in: the newest one, or the next when this node already joined
  // the newest (this launcher replaces one that was lost; that round failed).
  int first_round();
  // Joins round r and waits until every node has; an Error naming the nodes that did not within
  // the timeout.
  void join(int round);
  // Round r failed here: the other nodes leave it (failed_elsewhere) and round r + 1 comes next.
  // join and fail: a store out of reach is an Error saying that node 0 is lost.
  void fail(int round);
  // Whether round r failed on another node (non-blocking; a store out of reach counts as not yet).
  // A node that learns it from here (or failed itself) has seen the failure.
  bool failed(int round);
  // Node 0, which serves the store, before it exits after a failed round: waits (up to `within`;
  // a lost node never hears)
  // until every other node has seen the failure, so that none is left waiting for a store that is
  // gone (its ranks may be in the rendezvous, where no watchdog runs yet).
  void wait_until_seen(int round, std::chrono::milliseconds within);
  // This node's ranks all succeeded: the job is over, a failing node starts no new round (both
  // best effort: node 0's store ends with node 0's launcher).
  void done();
  bool any_done();

 private:
  Error store_lost(int round, const std::exception& e) const;

  std::unique_ptr<Store> store_;
  int node_, nnodes_;
  std::chrono::milliseconds timeout_;
  std::string address_;
};

}  // namespace tr::distributed
