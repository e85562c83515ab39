// A bad network in user space, for the multi-node tests (issue 30): the kernels these tests run on
// have no netem qdisc, so this relay stands in for `tc qdisc add ... netem delay 2ms 1ms loss 0.5%`.
// It makes one TUN device per node (IFF_TUN | IFF_NO_PI: bare IP packets, point to point, no ARP)
// in the namespace it runs in; the caller moves each device into its node's namespace, where the
// node's address goes on it (a device keeps its open fd across namespaces). Every IPv4 packet read
// from one device is dropped with probability --loss or written to the device of the node owning
// its destination address after a delay drawn uniformly from delay +- jitter, so packets may
// overtake each other, as with netem's jitter. At SIGTERM or SIGINT it prints, per link, what it
// forwarded and dropped and how long it really held the packets, then exits.
//
//   tun_netem [--delay-ms 2] [--jitter-ms 1] [--loss 0.005] [--seed 1] [--max-queue 20000] DEV=IPV4...
//
// stdout gets "tun_netem: ready" once every device exists, then the counts at exit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tun_netem: %s\n", what.c_str());
  std::exit(2);
}

struct Node {
  std::string dev;
  uint32_t addr = 0;  // network byte order
  int fd = -1;
};

struct Packet {
  int64_t due_ns, read_ns;
  uint64_t seq;  // equal deadlines leave in arrival order
  int from, to;
  std::vector<uint8_t> bytes;
};
struct Later {
  bool operator()(const Packet& a, const Packet& b) const {
    return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
  }
};

struct Link {
  uint64_t forwarded = 0, dropped = 0, write_failed = 0;
  double held_ns = 0;  // summed over the forwarded packets: what the relay really added
};

struct Options {
  double delay_ms = 2, jitter_ms = 1, loss = 0.005;
  uint64_t seed = 1;
  size_t max_queue = 20000;  // ~30 MB of 1500-byte packets at most: a flood cannot exhaust memory
  std::vector<Node> nodes;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--delay-ms")
      o.delay_ms = std::stod(value());
    else if (a == "--jitter-ms")
      o.jitter_ms = std::stod(value());
    else if (a == "--loss")
      o.loss = std::stod(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--max-queue")
      o.max_queue = std::stoul(value());
    else if (a.find('=') != std::string::npos && a[0] != '-') {
      Node n;
      n.dev = a.substr(0, a.find('='));
      const std::string ip = a.substr(a.find('=') + 1);
      if (n.dev.empty() || n.dev.size() >= IFNAMSIZ) die("device name '" + n.dev + "' must have 1 to 15 characters");
      in_addr in{};
      if (inet_pton(AF_INET, ip.c_str(), &in) != 1) die("'" + ip + "' is not an IPv4 address");
      n.addr = in.s_addr;
      o.nodes.push_back(n);
    } else {
      die("unknown argument '" + a +
          "'; usage: tun_netem [--delay-ms D] [--jitter-ms J] [--loss P] [--seed S] "
          "[--max-queue N] DEV=IPV4...");
    }
  }
  if (o.nodes.size() < 2) die("needs at least two DEV=IPV4 nodes");
  if (o.delay_ms < 0 || o.jitter_ms < 0 || o.jitter_ms > o.delay_ms) die("needs 0 <= jitter-ms <= delay-ms");
  if (o.loss < 0 || o.loss > 1) die("--loss must be in [0, 1]");
  if (o.max_queue == 0) die("--max-queue must be positive");
  return o;
}

int open_tun(const std::string& dev) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun: " + std::string(std::strerror(errno)));
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("cannot make TUN device " + dev + ": " + std::strerror(errno));
  return fd;
}

std::string ip_text(uint32_t addr) {
  char s[INET_ADDRSTRLEN] = "?";
  in_addr in{addr};
  inet_ntop(AF_INET, &in, s, sizeof s);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  const int n = int(o.nodes.size());

  // the signals stay blocked except inside ppoll, so a SIGTERM between two checks is not lost
  sigset_t stop_set, wait_mask;
  sigemptyset(&stop_set);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop_set, s);
  sigprocmask(SIG_BLOCK, &stop_set, &wait_mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(s, &sa, nullptr);
  }

  for (Node& node : o.nodes) node.fd = open_tun(node.dev);
  std::printf("tun_netem: ready: %d devices, delay %g ms +- %g ms, loss %g, seed %llu\n", n, o.delay_ms, o.jitter_ms,
              o.loss, static_cast<unsigned long long>(o.seed));
  std::fflush(stdout);

  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::priority_queue<Packet, std::vector<Packet>, Later> queue;
  std::vector<Link> links(size_t(n) * size_t(n));
  uint64_t seq = 0, unroutable = 0, queue_full = 0;
  std::vector<pollfd> fds(o.nodes.size());
  for (int i = 0; i < n; ++i) fds[size_t(i)] = {o.nodes[size_t(i)].fd, POLLIN, 0};
  std::vector<uint8_t> buf(65536);

  while (!g_stop) {
    int64_t t = now_ns();
    while (!queue.empty() && queue.top().due_ns <= t) {
      const Packet& p = queue.top();
      Link& l = links[size_t(p.from * n + p.to)];
      // a TUN write takes the whole packet or fails (its namespace's device down, say): a loss too
      if (write(o.nodes[size_t(p.to)].fd, p.bytes.data(), p.bytes.size()) == ssize_t(p.bytes.size())) {
        ++l.forwarded;
        l.held_ns += double(now_ns() - p.read_ns);
      } else {
        ++l.write_failed;
      }
      queue.pop();
    }
    timespec wait{1, 0};  // a second at most, so a stop is seen even without packets
    if (!queue.empty()) {
      const int64_t d = std::max<int64_t>(0, queue.top().due_ns - now_ns());
      if (d < 1000000000) wait = {0, long(d)};
    }
    const int ready = ppoll(fds.data(), fds.size(), &wait, &wait_mask);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die("ppoll: " + std::string(std::strerror(errno)));
    }
    for (int i = 0; i < n && ready > 0; ++i) {
      // a device deleted under the relay (its namespace gone first) would make ppoll return at
      // once forever: stop, with the counts so far
      if (fds[size_t(i)].revents & (POLLERR | POLLHUP | POLLNVAL)) {
        std::fprintf(stderr, "tun_netem: %s is gone: stopping\n", o.nodes[size_t(i)].dev.c_str());
        g_stop = 1;
      }
      if (!(fds[size_t(i)].revents & POLLIN)) continue;
      // a bounded batch per device and round, so one busy sender cannot starve the others or the queue
      for (int k = 0; k < 64; ++k) {
        const ssize_t len = read(fds[size_t(i)].fd, buf.data(), buf.size());
        if (len < 0) {
          if (errno != EAGAIN && errno != EINTR) {
            std::fprintf(stderr, "tun_netem: read from %s: %s: stopping\n", o.nodes[size_t(i)].dev.c_str(),
                         std::strerror(errno));
            g_stop = 1;
          }
          break;
        }
        const int64_t arrived = now_ns();
        // IPv6 router solicitations and the like have no node to go to: only IPv4 is routed
        int to = -1;
        if (len >= 20 && (buf[0] >> 4) == 4) {
          uint32_t dst;
          std::memcpy(&dst, buf.data() + 16, 4);
          for (int j = 0; j < n; ++j)
            if (j != i && o.nodes[size_t(j)].addr == dst) to = j;
        }
        if (to < 0) {
          ++unroutable;
          continue;
        }
        Link& l = links[size_t(i * n + to)];
        // both draws for every packet, so the decisions follow the seed whatever is dropped
        const double drop = unit(rng), spread = unit(rng);
        if (drop < o.loss) {
          ++l.dropped;
          continue;
        }
        if (queue.size() >= o.max_queue) {
          ++queue_full;
          continue;
        }
        const double delay_ms = o.delay_ms - o.jitter_ms + 2 * o.jitter_ms * spread;
        queue.push(Packet{arrived + int64_t(delay_ms * 1e6), arrived, seq++, i, to,
                          std::vector<uint8_t>(buf.begin(), buf.begin() + len)});
      }
    }
  }

  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const Link& l = links[size_t(i * n + j)];
      if (i == j || l.forwarded + l.dropped + l.write_failed == 0) continue;
      const uint64_t all = l.forwarded + l.dropped;
      std::printf(
          "tun_netem: %s -> %s: forwarded %llu, dropped %llu (%.2f%%), write failed %llu, held %.3f ms on average\n",
          ip_text(o.nodes[size_t(i)].addr).c_str(), ip_text(o.nodes[size_t(j)].addr).c_str(),
          static_cast<unsigned long long>(l.forwarded), static_cast<unsigned long long>(l.dropped),
          all ? 100.0 * double(l.dropped) / double(all) : 0.0, static_cast<unsigned long long>(l.write_failed),
          l.forwarded ? l.held_ns / double(l.forwarded) / 1e6 : 0.0);
    }
  std::printf("tun_netem: unroutable %llu, queue full %llu, still queued at exit %zu\n",
              static_cast<unsigned long long>(unroutable), static_cast<unsigned long long>(queue_full), queue.size());
  std::fflush(stdout);
  for (const Node& node : o.nodes) close(node.fd);
  return 0;
}
