#include "distributed/node_rendezvous.h"
#include <cstdlib>
#include "core/error.h"

namespace tr::distributed {

namespace {

std::string node_key(int round, int node) { return str("launch/round", round, "/node", node); }
std::string failed_key(int round) { return str("launch/round", round, "/failed"); }
std::string seen_key(int round, int node) { return str("launch/round", round, "/seen", node); }
Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

NodeRendezvous::NodeRendezvous(std::unique_ptr<Store> store, std::string address, int node_rank, int nnodes,
                               std::chrono::milliseconds timeout)
    : store_(std::move(store)), node_(node_rank), nnodes_(nnodes), timeout_(timeout), address_(std::move(address)) {}

int NodeRendezvous::first_round() {
  const int newest = int(store_->add("launch/round", 0));
  if (!store_->check({node_key(newest, node_)})) return newest;
  // this node was in the newest round already: that launcher is gone, and with it the round
  fail(newest);
  return newest + 1;
}

Error NodeRendezvous::store_lost(int round, const std::exception& e) const {
  return Error(str("launch: node ", node_, " at round ", round, ": the launchers' store at ", address_,
                   " does not answer: node 0, which serves it, is lost or cut off, and the job cannot go on "
                   "without it [",
                   e.what(), "]"));
}

void NodeRendezvous::join(int round) {
  try {
    store_->set(node_key(round, node_), bytes("1"));
  } catch (const std::exception& e) { throw store_lost(round, e); }
  std::vector<std::string> keys;
  for (int n = 0; n < nnodes_; ++n) keys.push_back(node_key(round, n));
  try {
    store_->wait(keys, timeout_);
  } catch (const Error&) {
    std::string missing;
    for (int n = 0; n < nnodes_; ++n)
      if (!store_->check({keys[size_t(n)]})) missing += str(missing.empty() ? "" : ", ", n);
    throw Error(str("launch: round ", round, " of the launchers' rendezvous at ", address_, ": node",
                    missing.find(',') != std::string::npos ? "s " : " ", missing, " did not join within ",
                    timeout_.count() / 1000.0,
                    " s (its launcher not started or lost, or given another "
                    "--master-addr, --master-port or TRAINER_STORE_TOKEN)"));
  }
}

void NodeRendezvous::fail(int round) {
  try {
    store_->set(failed_key(round), bytes(std::to_string(node_)));
    store_->set(seen_key(round, node_), bytes("1"));
    // the newest round becomes round + 1 once, whichever nodes fail it together: late launchers (a
    // lost node back) start from there
    if (store_->add(str("launch/round", round, "/ended"), 1) == 1) store_->add("launch/round", 1);
  } catch (const std::exception& e) { throw store_lost(round, e); }
}

bool NodeRendezvous::failed(int round) {
  try {
    if (!store_->check({failed_key(round)})) return false;
    store_->set(seen_key(round, node_), bytes("1"));
    return true;
  } catch (const std::exception&) {
    return false;  // out of reach: this node's ranks find that out themselves (their watchdog)
  }
}

void NodeRendezvous::wait_until_seen(int round, std::chrono::milliseconds within) {
  std::vector<std::string> keys;
  for (int n = 0; n < nnodes_; ++n) keys.push_back(seen_key(round, n));
  try {
    store_->wait(keys, within);
  } catch (const std::exception&) {
    // a node lost, or cut off: it cannot be told, and its ranks' watchdog stops them
  }
}

void NodeRendezvous::done() {
  try {
    store_->set("launch/done", bytes(std::to_string(node_)));
  } catch (const std::exception&) {
    // node 0 finished first and its store went with it: nobody is left to tell
  }
}

bool NodeRendezvous::any_done() {
  try {
    return store_->check({"launch/done"});
  } catch (const std::exception&) { return false; }
}

}  // namespace tr::distributed
