// The address a rank binds for Gloo (distributed/bind_address.h): the route to a loopback master,
// an interface by name (ours and torch's variable), an explicit address, and the errors.
#include <catch2/catch.hpp>
#include "unit/env_guard.h"
#include "unit/error_of.h"
#include "distributed/bind_address.h"

namespace test_bind_address {

using namespace tr;
using namespace tr::distributed;
using Catch::Matchers::Contains;

namespace {

// No interface variable from the environment the tests run in.
struct NoIfnameVars : EnvGuard {
  NoIfnameVars() {
    set("TRAINER_SOCKET_IFNAME", std::nullopt);
    set("GLOO_SOCKET_IFNAME", std::nullopt);
  }
};

}  // namespace

TEST_CASE("bind address: a master on this host routes through loopback", "[dist][bind_address]") {
  NoIfnameVars env;
  for (const char* master : {"127.0.0.1", "localhost"}) {
    INFO(master);
    BindAddress b = choose_bind_address(master, "");
    CHECK(b.address == "127.0.0.1");
    CHECK(b.interface == "lo");
    CHECK_FALSE(b.by_user);
    CHECK_THAT(b.reason, Contains("is on this host"));
  }
}

TEST_CASE("bind address: TRAINER_SOCKET_IFNAME, or torch's GLOO_SOCKET_IFNAME, names the interface",
          "[dist][bind_address]") {
  NoIfnameVars env;
  env.set("TRAINER_SOCKET_IFNAME", "lo");
  BindAddress b = choose_bind_address("10.213.0.1", "");  // the route to the master is not asked
  CHECK(b.address == "127.0.0.1");
  CHECK(b.interface == "lo");
  CHECK(b.by_user);
  CHECK_THAT(describe(b), Contains("127.0.0.1 (lo): set by TRAINER_SOCKET_IFNAME"));

  env.set("TRAINER_SOCKET_IFNAME", std::nullopt);
  env.set("GLOO_SOCKET_IFNAME", "lo");
  CHECK(choose_bind_address("10.213.0.1", "").reason == "set by GLOO_SOCKET_IFNAME");
  CHECK(interface_address("lo") == "127.0.0.1");
}

TEST_CASE("bind address: an interface that does not exist is an error naming it and the way out",
          "[dist][bind_address][errors]") {
  NoIfnameVars env;
  env.set("TRAINER_SOCKET_IFNAME", "nosuchif0");
  const std::string e = test::error_of([] { choose_bind_address("127.0.0.1", ""); });
  CHECK_THAT(e, Contains("there is no network interface 'nosuchif0' on this host"));
  CHECK_THAT(e, Contains("lo"));  // the interfaces there are
  CHECK_THAT(e, Contains("--bind-addr"));
  CHECK_THAT(e, Contains("TRAINER_SOCKET_IFNAME"));
}

TEST_CASE("bind address: an explicit address passes through, one that cannot be bound is an error",
          "[dist][bind_address][errors]") {
  NoIfnameVars env;
  env.set("TRAINER_SOCKET_IFNAME", "nosuchif0");  // the flag wins over the variable
  BindAddress b = choose_bind_address("10.213.0.1", "127.0.0.1");
  CHECK(b.address == "127.0.0.1");
  CHECK(b.by_user);
  CHECK(b.reason == "given by --bind-addr");
  // 192.0.2.0/24 is TEST-NET-1: documentation only, held by no interface
  const std::string e = test::error_of([] { choose_bind_address("127.0.0.1", "192.0.2.7"); });
  CHECK_THAT(e, Contains("cannot bind the address 192.0.2.7 (given by --bind-addr)"));
  CHECK_THAT(e, Contains("TRAINER_SOCKET_IFNAME"));
  CHECK_THAT(test::error_of([] { choose_bind_address("127.0.0.1", "not-an-address"); }),
             Contains("the bind address 'not-an-address'"));
}

}  // namespace test_bind_address
