// The TCP store server's state machine (internal to lib/distributed): connections, their buffered
// requests and replies, parked waits. Separate from the socket setup in tcp_store_server.cpp so
// that a fuzz target (tests/fuzz/fuzz_store_server.cpp) can feed it bytes over socketpairs.
#pragma once
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <thread>
#include "core/error.h"
#include "distributed/hash_store.h"
#include "distributed/tcp_store_io.h"

namespace tr::distributed {

struct TCPStoreServer::Impl {
  using Clock = store_io::Clock;  // (the header names store_io's helpers in full: it must not import them)
  struct Conn {
    int fd = -1;
    std::string peer;
    bool authed = false;
    Bytes in;
    Bytes out;
    size_t out_off = 0;
    bool waiting = false;  // a get/wait is parked: no further request is read until it is answered
    Clock::time_point hello_deadline;
    bool dead = false;  // closed at the end of the loop iteration (so iterators stay valid)
    bool refused = false;  // closed by the server, and logged
  };
  struct Waiter {
    uint64_t conn;
    std::vector<std::string> keys;
    Clock::time_point deadline;
    bool is_get;
  };

  std::string host;
  int port = 0;
  std::string token;
  int listen_fd = -1;
  int wake_fd = -1;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> refused{0};

  std::mutex data_mu;  // data is also touched by clear() from other threads
  std::map<std::string, Bytes> data;

  std::map<uint64_t, Conn> conns;  // node-based: references stay valid while others are added
  uint64_t next_id = 1;
  std::list<Waiter> waiters;
  std::vector<uint64_t> resumed;  // connections whose parked request was just answered
  bool accept_paused = false;     // accept() failed (no descriptors left): retried at accept_resume
  Clock::time_point accept_resume;
  // Connections that hung up without a word (a port scanner, a storm): one log line for all that
  // closed within kSilentReportEvery, not one each.
  static constexpr auto kSilentReportEvery = std::chrono::seconds(10);
  uint64_t silent_unreported = 0;
  std::atomic<uint64_t> silent_total{0};
  Clock::time_point silent_report_due;

  void report_silent(bool force = false) {
    if (silent_unreported == 0) return;
    const auto now = Clock::now();
    if (!force && now < silent_report_due) return;
    store_io::log_line(str("trainer store ", address(), ": ", silent_unreported, " connection", silent_unreported == 1 ? "" : "s",
                 " closed without saying hello (a port scanner, or a connection storm?)"));
    silent_unreported = 0;
    silent_report_due = now + kSilentReportEvery;
  }

  std::string address() const { return host + ":" + std::to_string(port); }

  void refuse(Conn& c, const std::string& why) {
    refused++;
    c.refused = true;
    store_io::log_line(str("trainer store ", address(), ": closed the connection from ", c.peer, ": ", why));
    c.dead = true;
  }

  void flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t r = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (r > 0) {
        c.out_off += size_t(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;  // the client went away; nothing to tell it
      return;
    }
    c.out.clear();
    c.out_off = 0;
    if (c.out.capacity() > store_io::kKeepBuffer) Bytes().swap(c.out);  // a 64 MiB reply's buffer is not kept
  }

  void reply(Conn& c, const Bytes& payload) {
    store_io::put_u32(c.out, uint32_t(payload.size()));
    c.out.insert(c.out.end(), payload.begin(), payload.end());
    flush(c);
  }

  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!data.count(k)) m.push_back(k);
    return m;
  }

  void park(uint64_t id, Conn& c, std::vector<std::string> keys, uint64_t timeout_ms, bool is_get) {
    c.waiting = true;
    waiters.push_back({id, std::move(keys), Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, store_io::kMaxTimeoutMs)), is_get});
  }

  // Answers every parked request whose keys now all exist (after a set or add).
  void notify() {
    for (auto it = waiters.begin(); it != waiters.end();) {
      Conn& c = conns.at(it->conn);
      Bytes payload{wire::kOk};
      {
        std::lock_guard<std::mutex> lock(data_mu);
        if (!missing_locked(it->keys).empty()) {
          ++it;
          continue;
        }
        if (it->is_get) store_io::put_str(payload, data.at(it->keys[0]));
      }
      reply(c, payload);
      c.waiting = false;
      resumed.push_back(it->conn);
      it = waiters.erase(it);
    }
  }

  // Answers parked requests past their deadline with the keys still missing, and closes
  // connections that never said hello.
  void expire() {
    auto now = Clock::now();
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      Conn& c = conns.at(it->conn);
      Bytes payload{wire::kTimeout};
      {
        std::lock_guard<std::mutex> lock(data_mu);
        store_io::put_keys(payload, missing_locked(it->keys));
      }
      reply(c, payload);
      c.waiting = false;
      resumed.push_back(it->conn);
      it = waiters.erase(it);
    }
    for (auto& [id, c] : conns)
      if (!c.authed && !c.dead && c.hello_deadline <= now) refuse(c, "no hello within the time limit");
  }

  int next_timeout_ms() {
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) {
      if (!next || t < *next) next = t;
    };
    for (const auto& w : waiters) consider(w.deadline);
    for (const auto& [id, c] : conns)
      if (!c.authed) consider(c.hello_deadline);
    if (accept_paused) consider(accept_resume);
    if (silent_unreported) consider(silent_report_due);
    if (!next) return -1;
    return store_io::ms_until(*next + std::chrono::milliseconds(1));  // +1: never wake a hair early and spin
  }

  void handle(uint64_t id, Conn& c, store_io::Reader& r) {
    uint8_t op = r.u8();
    if (!c.authed) {
      if (op != wire::kHello) throw store_io::ProtocolError("the first message is not a hello with the run's token");
      std::string t = r.text(wire::kMaxKeyBytes, "token");
      r.end();
      if (!token.empty() && !store_io::same_token(t, token)) throw store_io::ProtocolError("wrong token");
      c.authed = true;
      reply(c, Bytes{wire::kOk});
      return;
    }
    Bytes out{wire::kOk};
    switch (op) {
      case wire::kSet: {
        std::string key = r.text(wire::kMaxKeyBytes, "key");
        Bytes value = r.bytes(wire::kMaxValueBytes, "value");
        r.end();
        {
          std::lock_guard<std::mutex> lock(data_mu);
          data[key] = std::move(value);
        }
        reply(c, out);
        notify();
        return;
      }
      case wire::kGet: {
        std::string key = r.text(wire::kMaxKeyBytes, "key");
        uint64_t timeout_ms = r.u64();
        r.end();
        {
          std::lock_guard<std::mutex> lock(data_mu);
          auto it = data.find(key);
          if (it != data.end()) store_io::put_str(out, it->second);
        }
        if (out.size() > 1)
          reply(c, out);
        else
          park(id, c, {key}, timeout_ms, true);
        return;
      }
      case wire::kAdd: {
        std::string key = r.text(wire::kMaxKeyBytes, "key");
        int64_t delta = int64_t(r.u64());
        r.end();
        int64_t v = 0;
        try {
          std::lock_guard<std::mutex> lock(data_mu);
          auto it = data.find(key);
          int64_t old = it == data.end() ? 0 : parse_counter(key, it->second);
          TR_CHECK(!__builtin_add_overflow(old, delta, &v), "store add('", key, "'): ", old, " + ", delta,
                   " overflows int64");
          data[key] = format_counter(v);
        } catch (const Error& e) {
          Bytes failed{wire::kFailed};
          store_io::put_str(failed, std::string(e.what()));
          reply(c, failed);
          return;
        }
        store_io::put_u64(out, uint64_t(v));
        reply(c, out);
        notify();
        return;
      }
      case wire::kWait: {
        auto keys = r.keys();
        uint64_t timeout_ms = r.u64();
        r.end();
        bool ready;
        {
          std::lock_guard<std::mutex> lock(data_mu);
          ready = missing_locked(keys).empty();
        }
        if (ready)
          reply(c, out);
        else
          park(id, c, std::move(keys), timeout_ms, false);
        return;
      }
      case wire::kCheck: {
        auto keys = r.keys();
        r.end();
        std::lock_guard<std::mutex> lock(data_mu);
        store_io::put_u8(out, missing_locked(keys).empty() ? 1 : 0);
        break;
      }
      case wire::kDelete: {
        std::string key = r.text(wire::kMaxKeyBytes, "key");
        r.end();
        std::lock_guard<std::mutex> lock(data_mu);
        store_io::put_u8(out, data.erase(key) ? 1 : 0);
        break;
      }
      default:
        throw store_io::ProtocolError(str("unknown request type ", int(op)));
    }
    reply(c, out);
  }

  // Handles the complete requests buffered on a connection, up to the first one that parks.
  void process(uint64_t id) {
    Conn& c = conns.at(id);
    size_t pos = 0;
    try {
      while (!c.waiting && !c.dead && c.in.size() - pos >= 4) {
        uint32_t len = store_io::le32(c.in.data() + pos);
        // Checked on the header, before the body is buffered: an oversized message costs nothing.
        uint32_t limit = c.authed ? wire::kMaxFrameBytes : wire::kMaxHelloFrameBytes;
        if (len > limit)
          throw store_io::ProtocolError(str("message of ", len, " bytes exceeds the limit of ", limit, " bytes"));
        if (c.in.size() - pos - 4 < len) break;
        store_io::Reader r{c.in.data() + pos + 4, len};
        pos += 4 + size_t(len);
        handle(id, c, r);
      }
    } catch (const store_io::ProtocolError& e) {
      refuse(c, e.what());
    } catch (const std::exception& e) {  // e.g. out of memory: lose this client, keep serving
      refuse(c, str("internal error: ", e.what()));
    }
    if (c.dead) return;
    c.in.erase(c.in.begin(), c.in.begin() + std::ptrdiff_t(pos));
    if (c.in.empty() && c.in.capacity() > store_io::kKeepBuffer) Bytes().swap(c.in);
  }

  // Reads what is available (at most 1 MiB per turn, so one client cannot starve the others).
  void read_from(Conn& c) {
    uint8_t buf[64 * 1024];
    size_t total = 0;
    while (total < (1u << 20)) {
      ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
      if (r > 0) {
        c.in.insert(c.in.end(), buf, buf + r);
        total += size_t(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.dead = true;  // EOF or error: the client is gone
      return;
    }
  }

  // Out of file descriptors (a connection storm): the oldest connection still without a hello is
  // closed to make room (a rank says hello as soon as it connects; a stranger or a half-open socket
  // does not); with none, accepting pauses for a moment instead of spinning on the listening socket.
  bool evict_oldest_unauthed() {
    for (auto& [id, c] : conns)
      if (!c.authed && !c.dead) {
        refuse(c, "out of file descriptors: closed the oldest connection without a hello");
        ::close(c.fd);
        c.fd = -1;
        return true;
      }
    return false;
  }

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && evict_oldest_unauthed()) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          if (!accept_paused) store_io::log_line(str("trainer store ", address(), ": accept failed: ", std::strerror(errno),
                                           "; pausing new connections"));
          accept_paused = true;
          accept_resume = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      accept_paused = false;
      store_io::set_nodelay(fd);
      Conn c;
      c.fd = fd;
      c.peer = store_io::peer_name(fd);
      c.hello_deadline = Clock::now() + store_io::kHelloWithin;
      conns.emplace(next_id++, std::move(c));
    }
  }

  void sweep() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->second.dead) {
        ++it;
        continue;
      }
      waiters.remove_if([&](const Waiter& w) { return w.conn == it->first; });
      if (!it->second.authed && !it->second.refused) {
        ++silent_unreported;
        ++silent_total;
      }
      if (it->second.fd >= 0) ::close(it->second.fd);
      it = conns.erase(it);
    }
  }

  void run() {
    std::vector<pollfd> pfds;
    std::vector<uint64_t> ids;
    while (!stop.load()) {
      pfds.clear();
      ids.clear();
      pfds.push_back({wake_fd, POLLIN, 0});
      const bool accepting = !accept_paused || Clock::now() >= accept_resume;
      pfds.push_back({accepting ? listen_fd : -1, POLLIN, 0});  // fd -1: poll skips it
      for (auto& [id, c] : conns) {
        bool pending_out = c.out_off < c.out.size();
        // A parked or still-sending client is not read (its next request waits), but its hang-up is seen.
        short ev = (c.waiting || pending_out) ? POLLRDHUP : POLLIN;
        if (pending_out) ev |= POLLOUT;
        pfds.push_back({c.fd, ev, 0});
        ids.push_back(id);
      }
      int n = ::poll(pfds.data(), nfds_t(pfds.size()), next_timeout_ms());
      if (n < 0 && errno != EINTR) {
        store_io::log_line(str("trainer store ", address(), ": poll failed: ", std::strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (pfds[0].revents) {
        uint64_t v;
        ssize_t r = ::read(wake_fd, &v, sizeof v);
        (void)r;
      }
      if (stop.load()) break;
      if (n > 0 && (pfds[1].revents & POLLIN)) accept_all();
      for (size_t i = 2; n > 0 && i < pfds.size(); ++i) {
        short re = pfds[i].revents;
        if (!re) continue;
        Conn& c = conns.at(ids[i - 2]);
        if (c.dead) continue;
        if (re & POLLOUT) flush(c);
        if (re & POLLIN) {
          read_from(c);
          process(ids[i - 2]);
        } else if (re & (POLLRDHUP | POLLHUP | POLLERR)) {
          c.dead = true;
        }
      }
      expire();
      // Requests that arrived behind a parked one run now; they may park or resume others again.
      while (!resumed.empty()) {
        auto batch = std::move(resumed);
        resumed.clear();
        for (uint64_t id : batch)
          if (!conns.at(id).dead) process(id);
      }
      sweep();
      report_silent();
    }
    report_silent(true);
  }
};

}  // namespace tr::distributed
