#include "distributed/env.h"
#include <charconv>
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

}  // namespace

DistEnv read_dist_env() {
  DistEnv e;
  e.restart_count = int_var("TRAINER_RESTART_COUNT", 0, 0, 1 << 30);
  e.token = env("TRAINER_STORE_TOKEN").value_or("");
  auto ws = env("WORLD_SIZE");
  if (!ws) {
    TR_CHECK(!env("RANK"), "environment variable RANK is set but WORLD_SIZE is not: set both (or neither)");
    return e;
  }
  e.world_size = parse_int("WORLD_SIZE", *ws, 1, 1 << 20);
  auto rank = env("RANK");
  TR_CHECK(rank || e.world_size == 1, "WORLD_SIZE=", e.world_size, " is set but RANK is not");
  e.rank = rank ? parse_int("RANK", *rank, 0, e.world_size - 1) : 0;
  e.local_world_size = int_var("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = int_var("LOCAL_RANK", e.rank, 0, e.local_world_size - 1);
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
