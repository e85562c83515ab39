// The launchers' rounds (distributed/node_rendezvous.h) over a real TCP store on 127.0.0.1: every
// node joins a round, a failure anywhere ends it once for all, a launcher that replaces a lost
// node's starts the next round, a node that never comes and a lost store are named.
#include <catch2/catch.hpp>
#include <future>
#include "distributed/node_rendezvous.h"
#include "distributed/tcp_store.h"

namespace test_node_rendezvous {

using namespace tr::distributed;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;

namespace {

std::unique_ptr<NodeRendezvous> node(const TCPStoreServer& server, int rank, int nnodes, milliseconds join) {
  auto store = std::make_unique<TCPStore>("127.0.0.1", server.port(), "tok", milliseconds(2000));
  store->set_timeout(milliseconds(2000));
  return std::make_unique<NodeRendezvous>(std::move(store), server.address(), rank, nnodes, join);
}

}  // namespace

TEST_CASE("node rendezvous: rounds joined by every node, ended once by a failure anywhere", "[dist][launcher]") {
  TCPStoreServer server("127.0.0.1", 0, "tok");
  auto n0 = node(server, 0, 2, milliseconds(5000)), n1 = node(server, 1, 2, milliseconds(5000));
  CHECK(n0->first_round() == 0);
  CHECK(n1->first_round() == 0);
  auto joined = std::async(std::launch::async, [&] { n1->join(0); });
  n0->join(0);
  joined.get();
  CHECK_FALSE(n0->failed(0));

  // both nodes' ranks fail together (a peer's crash takes its partners along): one new round
  n1->fail(0);
  CHECK(n0->failed(0));
  n0->fail(0);
  auto late = node(server, 0, 2, milliseconds(5000));  // only to read the newest round
  CHECK(late->first_round() == 1);
  CHECK_FALSE(n0->failed(1));

  // node 1's launcher is lost with its node, and started again: its node already joined round 1,
  // so round 1 lost a node, and the replacement starts round 2, which node 0 is told to leave for
  auto r1 = std::async(std::launch::async, [&] { n1->join(1); });
  n0->join(1);
  r1.get();
  auto back = node(server, 1, 2, milliseconds(5000));
  CHECK(back->first_round() == 2);
  CHECK(n0->failed(1));
  CHECK_FALSE(n0->any_done());
  back->done();
  CHECK(n0->any_done());
}

TEST_CASE("node rendezvous: a node that never joins is named, a lost store says node 0 is lost", "[dist][launcher]") {
  auto server = std::make_unique<TCPStoreServer>("127.0.0.1", 0, "tok");
  auto n0 = node(*server, 0, 3, milliseconds(300));
  auto n2 = node(*server, 2, 3, milliseconds(300));
  auto two = std::async(std::launch::async, [&] {
    try {
      n2->join(0);
    } catch (...) {}
  });
  CHECK_THROWS_WITH(n0->join(0), Contains("round 0") && Contains("node 1 did not join within 0.3 s") &&
                                     Contains("its launcher not started or lost"));
  two.get();
  server.reset();
  CHECK_FALSE(n0->failed(0));  // out of reach: not a failure of the round (the ranks find out)
  CHECK_THROWS_WITH(n0->fail(0), Contains("does not answer: node 0, which serves it, is lost or cut off"));
}

}  // namespace test_node_rendezvous
