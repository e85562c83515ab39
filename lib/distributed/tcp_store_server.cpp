// TCP store server: one thread, poll() over non-blocking sockets. The format is described in
// tcp_store.h.
#include "distributed/tcp_store_io.h"
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <thread>
#include "core/error.h"
#include "distributed/hash_store.h"

namespace tr::distributed {

using namespace store_io;
using std::chrono::milliseconds;

// ---- server ---------------------------------------------------------------------------------

struct TCPStoreServer::Impl {
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

  std::string address() const { return host + ":" + std::to_string(port); }

  void refuse(Conn& c, const std::string& why) {
    refused++;
    log_line(str("trainer store ", address(), ": closed the connection from ", c.peer, ": ", why));
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
    if (c.out.capacity() > kKeepBuffer) Bytes().swap(c.out);  // a 64 MiB reply's buffer is not kept
  }

  void reply(Conn& c, const Bytes& payload) {
    put_u32(c.out, uint32_t(payload.size()));
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
    waiters.push_back({id, std::move(keys), Clock::now() + milliseconds(std::min(timeout_ms, kMaxTimeoutMs)), is_get});
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
        if (it->is_get) put_str(payload, data.at(it->keys[0]));
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
        put_keys(payload, missing_locked(it->keys));
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
    if (!next) return -1;
    return ms_until(*next + milliseconds(1));  // +1: never wake a hair early and spin
  }

  void handle(uint64_t id, Conn& c, Reader& r) {
    uint8_t op = r.u8();
    if (!c.authed) {
      if (op != wire::kHello) throw ProtocolError("the first message is not a hello with the run's token");
      std::string t = r.text(wire::kMaxKeyBytes, "token");
      r.end();
      if (!token.empty() && !same_token(t, token)) throw ProtocolError("wrong token");
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
          if (it != data.end()) put_str(out, it->second);
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
          put_str(failed, std::string(e.what()));
          reply(c, failed);
          return;
        }
        put_u64(out, uint64_t(v));
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
        put_u8(out, missing_locked(keys).empty() ? 1 : 0);
        break;
      }
      case wire::kDelete: {
        std::string key = r.text(wire::kMaxKeyBytes, "key");
        r.end();
        std::lock_guard<std::mutex> lock(data_mu);
        put_u8(out, data.erase(key) ? 1 : 0);
        break;
      }
      default:
        throw ProtocolError(str("unknown request type ", int(op)));
    }
    reply(c, out);
  }

  // Handles the complete requests buffered on a connection, up to the first one that parks.
  void process(uint64_t id) {
    Conn& c = conns.at(id);
    size_t pos = 0;
    try {
      while (!c.waiting && !c.dead && c.in.size() - pos >= 4) {
        uint32_t len = le32(c.in.data() + pos);
        // Checked on the header, before the body is buffered: an oversized message costs nothing.
        uint32_t limit = c.authed ? wire::kMaxFrameBytes : wire::kMaxHelloFrameBytes;
        if (len > limit)
          throw ProtocolError(str("message of ", len, " bytes exceeds the limit of ", limit, " bytes"));
        if (c.in.size() - pos - 4 < len) break;
        Reader r{c.in.data() + pos + 4, len};
        pos += 4 + size_t(len);
        handle(id, c, r);
      }
    } catch (const ProtocolError& e) {
      refuse(c, e.what());
    } catch (const std::exception& e) {  // e.g. out of memory: lose this client, keep serving
      refuse(c, str("internal error: ", e.what()));
    }
    if (c.dead) return;
    c.in.erase(c.in.begin(), c.in.begin() + std::ptrdiff_t(pos));
    if (c.in.empty() && c.in.capacity() > kKeepBuffer) Bytes().swap(c.in);
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

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          log_line(str("trainer store ", address(), ": accept failed: ", std::strerror(errno)));
        return;
      }
      set_nodelay(fd);
      Conn c;
      c.fd = fd;
      c.peer = peer_name(fd);
      c.hello_deadline = Clock::now() + kHelloWithin;
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
      ::close(it->second.fd);
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
      pfds.push_back({listen_fd, POLLIN, 0});
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
        log_line(str("trainer store ", address(), ": poll failed: ", std::strerror(errno)));
        std::this_thread::sleep_for(milliseconds(10));
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
    }
  }
};

TCPStoreServer::TCPStoreServer(const std::string& host, int port, std::string token) : impl_(new Impl) {
  TR_CHECK(port >= 0 && port <= 65535, "rendezvous store: port ", port, " is out of range");
  impl_->host = host;
  impl_->token = std::move(token);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string where = str(host, ":", port);
  int g = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  TR_CHECK(g == 0, "rendezvous store: cannot resolve ", where, ": ", ::gai_strerror(g));
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    // A port of the previous run in TIME_WAIT must not block a restart on the same --master-port.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      impl_->listen_fd = fd;
      break;
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  TR_CHECK(impl_->listen_fd >= 0, "rendezvous store: cannot listen on ", where, ": ", last,
           " (another run on this port? choose another --master-port)");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  impl_->port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->wake_fd < 0) {
    ::close(impl_->listen_fd);
    throw Error(str("rendezvous store: eventfd failed: ", std::strerror(errno)));
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TCPStoreServer::~TCPStoreServer() {
  impl_->stop = true;
  uint64_t one = 1;
  ssize_t r = ::write(impl_->wake_fd, &one, sizeof one);
  (void)r;
  impl_->thread.join();
  for (auto& [id, c] : impl_->conns) ::close(c.fd);
  ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
}

int TCPStoreServer::port() const { return impl_->port; }
const std::string& TCPStoreServer::host() const { return impl_->host; }
std::string TCPStoreServer::address() const { return impl_->address(); }
uint64_t TCPStoreServer::refused_connections() const { return impl_->refused.load(); }

void TCPStoreServer::clear() {
  std::lock_guard<std::mutex> lock(impl_->data_mu);
  impl_->data.clear();
}

// ---- client ---------------------------------------------------------------------------------

}  // namespace tr::distributed
