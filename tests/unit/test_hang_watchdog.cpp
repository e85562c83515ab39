// The hang watchdog's report (distributed/hang_watchdog.h) from given statuses: each status dated
// by its age, and the ranks that stopped publishing named first as the suspects; and the first
// status, published before the constructor returns.
#include <catch2/catch.hpp>
#include <memory>
#include "distributed/hang_watchdog.h"
#include "distributed/hash_store.h"
#include "distributed/process_group.h"

namespace test_hang_watchdog {

using namespace tr::distributed;
using Catch::Matchers::Contains;

namespace {

std::string status(int rank, const char* phase, double time, int64_t last_step, const char* collective = "") {
  return tr::str(R"({"rank":)", rank, R"(,"pid":)", 100 + rank, R"(,"host":"h","phase":")", phase,
                 R"(","phase_s":0.5,"last_step":)", last_step, R"(,"seq":7,"time":)", time, R"(,"collective":")",
                 collective, R"("})");
}

}  // namespace

TEST_CASE("hang watchdog report: ages of the statuses, the ranks that stopped publishing first", "[dist][watchdog]") {
  const double now = 1000.0;
  const std::vector<std::string> statuses{status(0, "step 1106", 999.6, 1105, "allreduce (sum) of 4.0 KiB f32"),
                                          status(1, "eval after step 938", 989.8, 938),
                                          status(2, "step 1106", 999.9, 1105), ""};
  const std::string r = HangWatchdog::report(statuses, 10.0, "step 1106", now, {false, true, false, true});
  INFO(r);
  CHECK_THAT(r, Contains("hang_timeout_s = 10.0 s"));
  CHECK_THAT(r, Contains("ranks 1, 3 stopped publishing (stopped, dead or cut off): the suspects"));
  // the suspects come first, the stale status with its age
  const size_t r1 = r.find("\n  rank 1 (pid 101"), r3 = r.find("\n  rank 3:"), r0 = r.find("\n  rank 0 (pid 100");
  REQUIRE(r1 != std::string::npos);
  REQUIRE(r3 != std::string::npos);
  REQUIRE(r0 != std::string::npos);
  CHECK(r1 < r0);
  CHECK(r3 < r0);
  CHECK_THAT(r, Contains("rank 1 (pid 101 on h): STOPPED PUBLISHING; status 10.2 s old: in eval after step 938"));
  CHECK_THAT(r, Contains("rank 0 (pid 100 on h): status 0.4 s old: in step 1106 for 0.5 s, last completed step 1105; "
                         "in allreduce (sum) of 4.0 KiB f32"));
  CHECK_THAT(r, Contains("rank 3: no status"));

  // a status with its node and address (several nodes): where the lost rank ran
  const std::string placed = R"({"rank":1,"pid":7,"host":"vm","node":1,"addr":"10.213.0.2","phase":"step 9",)"
                             R"("phase_s":0.1,"last_step":8,"seq":3,"time":990.0,"collective":""})";
  CHECK_THAT(HangWatchdog::report({statuses[0], placed}, 10.0, "step 9", now, {false, true}),
             Contains("rank 1 (node 1, pid 7 on vm at 10.213.0.2): STOPPED PUBLISHING; status 10.0 s old"));

  // nobody quiet: no suspect line, ranks in order
  const std::string q = HangWatchdog::report({statuses[0], statuses[2]}, 3.0, "step 5", now, {false, false});
  CHECK_THAT(q, !Contains("stopped publishing") && !Contains("STOPPED"));
  CHECK(q.find("rank 0 (pid") < q.find("rank 1 (pid"));
}

namespace {

// The watchdog owns its store connection; this one forwards to a store the test keeps.
class SharedStore : public Store {
 public:
  explicit SharedStore(std::shared_ptr<HashStore> s) : s_(std::move(s)) {}
  void set(const std::string& k, const Bytes& v) override { s_->set(k, v); }
  Bytes get(const std::string& k) override { return s_->get(k); }
  int64_t add(const std::string& k, int64_t d) override { return s_->add(k, d); }
  using Store::wait;
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { s_->wait(k, t); }
  bool check(const std::vector<std::string>& k) override { return s_->check(k); }
  bool delete_key(const std::string& k) override { return s_->delete_key(k); }

 private:
  std::shared_ptr<HashStore> s_;
};

}  // namespace

// A node cut off within its watchdog's first period (a fast first step) must still be reported as
// one that stopped publishing, with where it was: its first status is in the store before the
// constructor returns, not a period later.
TEST_CASE("hang watchdog: a rank's first status is in the store before its first step", "[dist][watchdog]") {
  HashStore pg_store;
  auto pg = make_process_group("gloo", pg_store, 0, 1, std::chrono::milliseconds(1000), "solo");
  auto kept = std::make_shared<HashStore>();
  HangWatchdogOptions o;
  o.key_prefix = "w";
  HangWatchdog w(std::make_unique<SharedStore>(kept), *pg, o);
  REQUIRE(kept->check({"w/status/0"}));
  const Bytes b = kept->get("w/status/0");
  CHECK_THAT(std::string(b.begin(), b.end()), Contains(R"("rank":0)") && Contains(R"("seq":1)"));
}

}  // namespace test_hang_watchdog
