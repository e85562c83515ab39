// TCP store client: one blocking request at a time, with deadlines. The format is described in
// tcp_store.h.
#include "distributed/tcp_store_io.h"
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>
#include "core/error.h"

namespace tr::distributed {

using namespace store_io;
using std::chrono::milliseconds;

namespace {

void check_key(const std::string& key, const char* op) {
  TR_CHECK(key.size() <= wire::kMaxKeyBytes, "store ", op, ": key of ", key.size(), " bytes exceeds the limit of ",
           wire::kMaxKeyBytes, " bytes");
}

std::vector<std::string> read_keys(Reader& r) { return r.keys(); }

// How long a client waits for the answer to a request the server may park for `t`.
milliseconds with_slack(milliseconds t) {
  return t >= milliseconds(kMaxTimeoutMs) ? milliseconds(kMaxTimeoutMs) : t + kReplySlack;
}

}  // namespace

TCPStore::TCPStore(std::string host, int port, std::string token, milliseconds connect_timeout)
    : host_(std::move(host)), port_(port), token_(std::move(token)) {
  TR_CHECK(port_ > 0 && port_ <= 65535, "rendezvous store: port ", port_, " is out of range");
  TR_CHECK(token_.size() <= wire::kMaxKeyBytes, "rendezvous store: the token is longer than ", wire::kMaxKeyBytes,
           " bytes");
  std::lock_guard<std::mutex> lock(mu_);
  connect_locked(connect_timeout);
}

TCPStore::~TCPStore() { close_locked(); }

void TCPStore::close_locked() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TCPStore::connect_locked(milliseconds within) {
  within = std::clamp(within, milliseconds(0), milliseconds(kMaxTimeoutMs));
  auto deadline = Clock::now() + within;
  std::string last = "no attempt";
  auto backoff = milliseconds(10);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int fd = -1;
  // Retry: the server (launcher or rank 0) may start after us, and a name may resolve late.
  while (fd < 0) {
    addrinfo* res = nullptr;
    int g = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &res);
    if (g != 0) last = ::gai_strerror(g);
    for (addrinfo* ai = g == 0 ? res : nullptr; ai && fd < 0; ai = ai->ai_next) {
      int s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (s < 0) {
        last = std::strerror(errno);
        continue;
      }
      int err = 0;
      if (::connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          pollfd pfd{s, POLLOUT, 0};
          int k = ::poll(&pfd, 1, std::min(ms_until(deadline), 5000));
          socklen_t len = sizeof err;
          if (k <= 0)
            err = ETIMEDOUT;
          else
            ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
      if (err == 0) {
        fd = s;
      } else {
        last = std::strerror(err);
        ::close(s);
      }
    }
    if (res) ::freeaddrinfo(res);
    if (fd >= 0) break;
    if (Clock::now() >= deadline)
      throw Error(str("cannot connect to the rendezvous store at ", address(), " within ", within.count(), " ms: ",
                      last, " (is the launcher / rank 0 running, and are MASTER_ADDR and MASTER_PORT right?)"));
    std::this_thread::sleep_for(std::min<milliseconds>(backoff, milliseconds(ms_until(deadline))));
    backoff = std::min(backoff * 2, milliseconds(500));
  }
  set_nodelay(fd);
  fd_ = fd;

  Bytes hello{wire::kHello};
  put_str(hello, token_);
  Bytes frame;
  put_le32(frame, uint32_t(hello.size()));
  frame.insert(frame.end(), hello.begin(), hello.end());
  auto reply_by = std::max(deadline, Clock::now() + std::chrono::seconds(10));
  std::string err = send_all(fd_, frame.data(), frame.size(), reply_by);
  uint8_t answer[5];
  if (err.empty()) err = recv_all(fd_, answer, sizeof answer, reply_by);
  if (!err.empty()) {
    close_locked();
    throw Error(str("the rendezvous store at ", address(), " refused the connection (", err,
                    "): is TRAINER_STORE_TOKEN the one of this run? The server logs the refusal."));
  }
  if (le32(answer) != 1 || answer[4] != wire::kOk) {
    close_locked();
    throw Error(str("the rendezvous store at ", address(), " answered the hello with something unexpected"));
  }
}

Bytes TCPStore::roundtrip(const Bytes& request, milliseconds reply_within, const std::string& what) {
  if (fd_ < 0) connect_locked(timeout());  // the previous request broke the connection
  auto deadline = Clock::now() + std::min(reply_within, milliseconds(kMaxTimeoutMs));
  Bytes frame;
  frame.reserve(request.size() + 4);
  put_le32(frame, uint32_t(request.size()));
  frame.insert(frame.end(), request.begin(), request.end());
  std::string err = send_all(fd_, frame.data(), frame.size(), deadline);
  uint8_t hdr[4];
  if (err.empty()) err = recv_all(fd_, hdr, 4, deadline);
  Bytes payload;
  if (err.empty()) {
    uint32_t len = le32(hdr);
    if (len == 0 || len > wire::kMaxFrameBytes) {
      err = str("malformed reply of ", len, " bytes");
    } else {
      payload.resize(len);
      err = recv_all(fd_, payload.data(), len, deadline);
    }
  }
  if (!err.empty()) {
    close_locked();  // mid-message: the stream can no longer be trusted
    throw Error(str("store ", what, " at ", address(), ": ", err));
  }
  if (payload[0] == wire::kFailed) {
    std::string msg = "(unreadable message)";
    try {
      Reader r{payload.data() + 1, payload.size() - 1};
      msg = r.text(wire::kMaxFrameBytes, "message");
    } catch (const ProtocolError&) {}
    throw Error(str(msg, " (store at ", address(), ")"));
  }
  return payload;
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  check_key(key, "set");
  TR_CHECK(value.size() <= wire::kMaxValueBytes, "store set('", key, "'): value of ", value.size(),
           " bytes exceeds the limit of ", wire::kMaxValueBytes, " bytes");
  Bytes req{wire::kSet};
  put_str(req, key);
  put_str(req, value);
  std::lock_guard<std::mutex> lock(mu_);
  roundtrip(req, timeout(), str("set('", key, "')"));
}

Bytes TCPStore::get(const std::string& key) {
  check_key(key, "get");
  Bytes req{wire::kGet};
  put_str(req, key);
  put_u64(req, uint64_t(std::max<int64_t>(timeout().count(), 0)));
  std::lock_guard<std::mutex> lock(mu_);
  Bytes reply = roundtrip(req, with_slack(timeout()), str("get('", key, "')"));
  try {
    Reader r{reply.data() + 1, reply.size() - 1};
    if (reply[0] == wire::kTimeout)
      throw Error(str("store get('", key, "') timed out after ", timeout().count(), " ms at ", address(),
                      ": keys still missing: ", read_keys(r)));
    Bytes v = r.bytes(wire::kMaxValueBytes, "value");
    r.end();
    return v;
  } catch (const ProtocolError& e) {
    close_locked();
    throw Error(str("store get('", key, "') at ", address(), ": malformed reply: ", e.what()));
  }
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  check_key(key, "add");
  Bytes req{wire::kAdd};
  put_str(req, key);
  put_u64(req, uint64_t(delta));
  std::lock_guard<std::mutex> lock(mu_);
  Bytes reply = roundtrip(req, timeout(), str("add('", key, "')"));
  TR_CHECK(reply.size() == 9, "store add('", key, "') at ", address(), ": malformed reply");
  Reader r{reply.data() + 1, 8};
  return int64_t(r.u64());
}

void TCPStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  if (keys.empty()) return;
  size_t total = 16;
  for (const auto& k : keys) {
    check_key(k, "wait");
    total += 4 + k.size();
  }
  TR_CHECK(total <= wire::kMaxFrameBytes, "store wait: ", keys.size(), " keys exceed the message limit");
  Bytes req{wire::kWait};
  put_keys(req, keys);
  put_u64(req, uint64_t(std::max<int64_t>(timeout.count(), 0)));
  std::lock_guard<std::mutex> lock(mu_);
  Bytes reply = roundtrip(req, with_slack(timeout), "wait");
  if (reply[0] == wire::kOk) return;
  std::vector<std::string> missing;
  try {
    Reader r{reply.data() + 1, reply.size() - 1};
    missing = read_keys(r);
  } catch (const ProtocolError& e) {
    close_locked();
    throw Error(str("store wait at ", address(), ": malformed reply: ", e.what()));
  }
  throw Error(
      str("store wait timed out after ", timeout.count(), " ms at ", address(), ": keys still missing: ", missing));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k, "check");
  Bytes req{wire::kCheck};
  put_keys(req, keys);
  std::lock_guard<std::mutex> lock(mu_);
  Bytes reply = roundtrip(req, timeout(), "check");
  TR_CHECK(reply.size() == 2, "store check at ", address(), ": malformed reply");
  return reply[1] != 0;
}

bool TCPStore::delete_key(const std::string& key) {
  check_key(key, "delete_key");
  Bytes req{wire::kDelete};
  put_str(req, key);
  std::lock_guard<std::mutex> lock(mu_);
  Bytes reply = roundtrip(req, timeout(), str("delete_key('", key, "')"));
  TR_CHECK(reply.size() == 2, "store delete_key('", key, "') at ", address(), ": malformed reply");
  return reply[1] != 0;
}

}  // namespace tr::distributed
