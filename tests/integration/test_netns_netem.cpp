// A bad network between the nodes (issue 30): 2 ms +- 1 ms of delay and 0.5% loss on every link,
// as `tc ... netem delay 2ms 1ms loss 0.5%` would make it (here by tun_netem, netns_impaired.h).
// TCP retransmits what is lost, so the run must give the same numbers as on a clean link and as
// --nproc 2 on one host; what the bad link costs per step is printed. Needs root, `ip` and TUN;
// skipped, visibly, without them.
#include <algorithm>
#include <regex>
#include <sstream>
#include "integration/netns_impaired.h"

namespace test_netns_netem {

using namespace it;

namespace {

const std::string kRun = "'" TRAINER_BINARY "' run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.steps=30 " +
                         "--set train.log_every=1 --set train.eval_batches=2 --set log.progress=lines " +
                         "--set checkpoint.save_final=false";

double median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// the median train step in ms from a metrics file of one line per step (128 samples a step); the
// first line, which waits for the ranks to connect, left out
double median_step_ms(const std::string& metrics) {
  std::vector<double> sps = metric_values(metrics, "train", "samples_per_s");
  REQUIRE(sps.size() > 2);
  std::vector<double> ms;
  for (size_t i = 1; i < sps.size(); ++i) ms.push_back(128.0 / sps[i] * 1e3);
  return median(ms);
}

struct LinkCounts {
  uint64_t forwarded = 0, dropped = 0;
  double held_ms = 0;  // the mean time the relay held a forwarded packet
};
std::vector<LinkCounts> relay_links(const std::string& out) {
  std::vector<LinkCounts> links;
  const std::regex re(R"(-> \S+: forwarded (\d+), dropped (\d+) \([^)]*\), write failed \d+, held ([0-9.]+) ms)");
  for (std::sregex_iterator m(out.begin(), out.end(), re), end; m != end; ++m)
    links.push_back({std::stoull((*m)[1].str()), std::stoull((*m)[2].str()), std::stod((*m)[3].str())});
  return links;
}

}  // namespace

TEST_CASE("two nodes on a bad network (2 ms +- 1 ms, 0.5% loss) equal a clean link and --nproc 2 on one host",
          "[integration][dist][netns]") {
  fs::path d = fresh_dir("netns_netem");
  double clean_rtt = 0, clean_step = 0;
  {
    NetnsNodes net(2);
    if (!net.why_not.empty()) {
      WARN("skipped: " << net.why_not);
      return;
    }
    clean_rtt = median(connect_rtts_ms(net, 1, 0, 9));
    Result r = run_nodes(d, net, kRun + " --set run.name=clean");
    INFO(r.out << "\nnode 1:\n" << read(d / "node1.log"));
    REQUIRE(r.code == 0);
    clean_step = median_step_ms(read(d / "runs/clean/metrics.jsonl"));
  }
  ImpairedNodes net(2, Impairment{2, 1, 0.005, 7});
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  REQUIRE(net.failed == "");
  // each way at least delay - jitter: no connect can take under 2 ms, on a clean link ~0.1 ms
  const std::vector<double> rtt = connect_rtts_ms(net, 1, 0, 9);
  REQUIRE(rtt.size() == 9);
  CHECK(rtt.front() >= 2.0);
  Result r = run_nodes(d, net, kRun + " --set run.name=bad");
  const std::string relay = net.stop();
  INFO(r.out << "\nnode 1:\n" << read(d / "node1.log") << "\nrelay:\n" << relay);
  REQUIRE(r.code == 0);
  CHECK(read(d / "node1.rc") == "0\n");
  CHECK_THAT(r.out,
             Contains("gloo: binding 10.213.0.1 (" + net.veth[0] + "): the interface that routes to the master"));

  // both ways carried the gradients; ~0.5% of their packets lost (the run's tens of thousands make
  // 0.25% to 1% sure), and each forwarded one held 2 ms on average, as drawn, or a little longer
  const std::vector<LinkCounts> links = relay_links(relay);
  REQUIRE(links.size() == 2);
  for (const LinkCounts& l : links) {
    CHECK(l.forwarded > 10000);
    const double lost = double(l.dropped) / double(l.forwarded + l.dropped);
    CHECK(lost > 0.0025);
    CHECK(lost < 0.01);
    CHECK(l.held_ms >= 1.95);
    CHECK(l.held_ms < 8.0);  // (a loaded machine wakes the relay late: 2.3-2.9 ms seen under load 2-5)
  }

  Result one = shell(d, kRun + " --set run.name=one --nproc 2");
  INFO(one.out);
  REQUIRE(one.code == 0);
  const std::string bad = read(d / "runs/bad/metrics.jsonl");
  check_same_losses(read(d / "runs/one/metrics.jsonl"), bad, 30);
  check_same_losses(read(d / "runs/clean/metrics.jsonl"), bad, 30);

  const double bad_step = median_step_ms(bad);
  std::ostringstream cost;
  cost.precision(3);
  cost << "bad network (2 ms +- 1 ms, 0.5% loss): connect RTT " << median(rtt) << " ms (clean " << clean_rtt
       << " ms), lost " << links[0].dropped + links[1].dropped << " of "
       << links[0].forwarded + links[1].forwarded + links[0].dropped + links[1].dropped
       << " packets; median train step " << bad_step << " ms vs " << clean_step << " ms on a clean link ("
       << bad_step / clean_step << "x)";
  WARN(cost.str());
}

}  // namespace test_netns_netem
