// The TCP store server's state machine: one thread, poll() over non-blocking sockets, requests
// answered in arrival order per connection; a get or wait on missing keys parks its connection
// until a set or add makes them exist, or its deadline passes.
#include "distributed/tcp_store_server_impl.h"
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include "core/error.h"
#include "distributed/hash_store.h"

namespace tr::distributed {

void TCPStoreServer::Impl::report_silent(bool force) {
  if (silent_unreported == 0) return;
  const auto now = Clock::now();
  if (!force && now < silent_report_due) return;
  store_io::log_line(str("trainer store ", address(), ": ", silent_unreported, " connection",
                         silent_unreported == 1 ? "" : "s",
                         " closed without saying hello (a port scanner, or a connection storm?)"));
  silent_unreported = 0;
  silent_report_due = now + kSilentReportEvery;
}

void TCPStoreServer::Impl::refuse(Conn& c, const std::string& why) {
  refused++;
  c.refused = true;
  store_io::log_line(str("trainer store ", address(), ": closed the connection from ", c.peer, ": ", why));
  c.dead = true;
}

void TCPStoreServer::Impl::flush(Conn& c) {
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

void TCPStoreServer::Impl::reply(Conn& c, const Bytes& payload) {
  put_le32(c.out, uint32_t(payload.size()));
  c.out.insert(c.out.end(), payload.begin(), payload.end());
  flush(c);
}

std::vector<std::string> TCPStoreServer::Impl::missing_locked(const std::vector<std::string>& keys) {
  std::vector<std::string> m;
  for (const auto& k : keys)
    if (!data.count(k)) m.push_back(k);
  return m;
}

void TCPStoreServer::Impl::park(uint64_t id, Conn& c, std::vector<std::string> keys, uint64_t timeout_ms, bool is_get) {
  c.waiting = true;
  waiters.push_back({id, std::move(keys),
                     Clock::now() + std::chrono::milliseconds(std::min(timeout_ms, store_io::kMaxTimeoutMs)), is_get});
}

// Answers every parked request whose keys now all exist (after a set or add).
void TCPStoreServer::Impl::notify() {
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

void TCPStoreServer::Impl::expire() {
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

int TCPStoreServer::Impl::next_timeout_ms() {
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

// One request: its kind is the first byte; a connection's first request must be its hello.
void TCPStoreServer::Impl::handle(uint64_t id, Conn& c, store_io::Reader& r) {
  const uint8_t op = r.u8();
  if (!c.authed) {
    if (op != wire::kHello) throw store_io::ProtocolError("the first message is not a hello with the run's token");
    return handle_hello(c, r);
  }
  switch (op) {
    case wire::kSet: return handle_set(c, r);
    case wire::kGet: return handle_get(id, c, r);
    case wire::kAdd: return handle_add(c, r);
    case wire::kWait: return handle_wait(id, c, r);
    case wire::kCheck: return handle_check(c, r);
    case wire::kDelete: return handle_delete(c, r);
    default: throw store_io::ProtocolError(str("unknown request type ", int(op)));
  }
}

void TCPStoreServer::Impl::handle_hello(Conn& c, store_io::Reader& r) {
  std::string t = r.text(wire::kMaxKeyBytes, "token");
  r.end();
  if (!token.empty() && !store_io::same_token(t, token)) throw store_io::ProtocolError("wrong token");
  c.authed = true;
  reply(c, Bytes{wire::kOk});
}

void TCPStoreServer::Impl::handle_set(Conn& c, store_io::Reader& r) {
  std::string key = r.text(wire::kMaxKeyBytes, "key");
  Bytes value = r.bytes(wire::kMaxValueBytes, "value");
  r.end();
  {
    std::lock_guard<std::mutex> lock(data_mu);
    data[key] = std::move(value);
  }
  reply(c, Bytes{wire::kOk});
  notify();
}

// The value, or (the key missing) the connection parks until a set or add makes it exist.
void TCPStoreServer::Impl::handle_get(uint64_t id, Conn& c, store_io::Reader& r) {
  std::string key = r.text(wire::kMaxKeyBytes, "key");
  uint64_t timeout_ms = r.u64();
  r.end();
  Bytes out{wire::kOk};
  {
    std::lock_guard<std::mutex> lock(data_mu);
    auto it = data.find(key);
    if (it != data.end()) store_io::put_str(out, it->second);
  }
  if (out.size() > 1)
    reply(c, out);
  else
    park(id, c, {key}, timeout_ms, true);
}

// A counter stored as text (hash_store.h's format); an overflow or a value that is not a counter
// is answered as a failure, not a protocol error: the connection stays.
void TCPStoreServer::Impl::handle_add(Conn& c, store_io::Reader& r) {
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
  Bytes out{wire::kOk};
  store_io::put_u64(out, uint64_t(v));
  reply(c, out);
  notify();
}

void TCPStoreServer::Impl::handle_wait(uint64_t id, Conn& c, store_io::Reader& r) {
  auto keys = r.keys();
  uint64_t timeout_ms = r.u64();
  r.end();
  bool ready;
  {
    std::lock_guard<std::mutex> lock(data_mu);
    ready = missing_locked(keys).empty();
  }
  if (ready)
    reply(c, Bytes{wire::kOk});
  else
    park(id, c, std::move(keys), timeout_ms, false);
}

void TCPStoreServer::Impl::handle_check(Conn& c, store_io::Reader& r) {
  auto keys = r.keys();
  r.end();
  Bytes out{wire::kOk};
  {
    std::lock_guard<std::mutex> lock(data_mu);
    store_io::put_u8(out, missing_locked(keys).empty() ? 1 : 0);
  }
  reply(c, out);
}

void TCPStoreServer::Impl::handle_delete(Conn& c, store_io::Reader& r) {
  std::string key = r.text(wire::kMaxKeyBytes, "key");
  r.end();
  Bytes out{wire::kOk};
  {
    std::lock_guard<std::mutex> lock(data_mu);
    store_io::put_u8(out, data.erase(key) ? 1 : 0);
  }
  reply(c, out);
}

void TCPStoreServer::Impl::process(uint64_t id) {
  Conn& c = conns.at(id);
  size_t pos = 0;
  try {
    while (!c.waiting && !c.dead && c.in.size() - pos >= 4) {
      uint32_t len = le32(c.in.data() + pos);
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
void TCPStoreServer::Impl::read_from(Conn& c) {
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
bool TCPStoreServer::Impl::evict_oldest_unauthed() {
  for (auto& [id, c] : conns)
    if (!c.authed && !c.dead) {
      refuse(c, "out of file descriptors: closed the oldest connection without a hello");
      ::close(c.fd);
      c.fd = -1;
      return true;
    }
  return false;
}

void TCPStoreServer::Impl::accept_burst() {
  for (int accepted = 0; accepted < kAcceptBurst;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && evict_oldest_unauthed()) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (!accept_paused)
          store_io::log_line(
              str("trainer store ", address(), ": accept failed: ", std::strerror(errno), "; pausing new connections"));
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
    ++accepted;
  }
}

void TCPStoreServer::Impl::sweep() {
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

void TCPStoreServer::Impl::run() {
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
    if (n > 0 && (pfds[1].revents & POLLIN)) accept_burst();
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

}  // namespace tr::distributed
