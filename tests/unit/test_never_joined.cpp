// Which rank never joined the collective the others wait in (distributed/never_joined.h), from
// the ranks' hang-watchdog statuses, and the sentence in the watchdog's report.
#include <catch2/catch.hpp>
#include "distributed/hang_watchdog.h"
#include "distributed/never_joined.h"

namespace test_never_joined {

using namespace tr::distributed;
using Catch::Matchers::Contains;

namespace {

// a status with the process group's collective progress (issued 0: a group that does not number them)
std::string status(int rank, uint64_t issued, uint64_t pending_tag, const char* pending = "") {
  std::string s =
      tr::str(R"({"rank":)", rank, R"(,"pid":)", 100 + rank,
              R"(,"host":"h","phase":"step 25","phase_s":6.2,"last_step":24,"seq":7,"time":999.5,"collective":"")");
  if (issued)
    s += tr::str(R"(,"issued":)", issued, R"(,"pending_tag":)", pending_tag, R"(,"pending":")", pending, R"(")");
  return s + "}";
}

const char* kBucket = "allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1";

}  // namespace

TEST_CASE("never joined: the rank whose last issued collective is before the one the others wait in",
          "[dist][watchdog]") {
  const std::string s = describe_never_joined({status(0, 30, 30, kBucket), status(1, 29, 0)});
  CHECK(s ==
        "rank 1 never joined collective tag 30 (allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1), which "
        "rank 0 waits in; rank 1 issued up to tag 29");
  // several: the oldest pending collective decides, each missing rank with how far it got; a rank
  // without a status is left out (the report says it has none)
  const std::string m = describe_never_joined(
      {status(0, 31, 30, kBucket), status(1, 29, 0), status(2, 30, 30, kBucket), "", status(4, 12, 0)});
  CHECK(m ==
        "ranks 1, 4 never joined collective tag 30 (allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1), "
        "which ranks 0, 2 wait in; rank 1 issued up to tag 29, rank 4 issued up to tag 12");
}

TEST_CASE("never joined: every rank issued it, or nothing to tell", "[dist][watchdog]") {
  CHECK_THAT(describe_never_joined({status(0, 30, 30, kBucket), status(1, 30, 30, kBucket)}),
             Contains("every rank that reported issued collective tag 30 (allreduce (sum)") &&
                 Contains("it has not completed on ranks 0, 1"));
  CHECK(describe_never_joined({status(0, 30, 0), status(1, 30, 0)}).empty());  // nobody waits
  CHECK(describe_never_joined({status(0, 0, 0), status(1, 0, 0)}).empty());    // Gloo: not numbered
  CHECK(describe_never_joined({"{garbled", status(1, 29, 0)}).empty());
  CHECK(describe_never_joined({}).empty());
}

TEST_CASE("hang watchdog report: names the rank that never joined the collective", "[dist][watchdog]") {
  const std::string r =
      HangWatchdog::report({status(0, 30, 30, kBucket), status(1, 29, 0)}, 3.0, "step 25", 1000.0, {false, false});
  INFO(r);
  CHECK_THAT(r, Contains("'step 25' has run for more than hang_timeout_s = 3.0 s; rank 1 never joined collective "
                         "tag 30 (allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1), which rank 0 waits in; "
                         "rank 1 issued up to tag 29; the ranks' last status"));
  // without numbered collectives the report is as before
  const std::string g =
      HangWatchdog::report({status(0, 0, 0), status(1, 0, 0)}, 3.0, "step 25", 1000.0, {false, false});
  CHECK_THAT(g, !Contains("never joined"));
}

}  // namespace test_never_joined
