// The TCP store's socket helpers: nodelay, peer names, deadline-bounded send/recv, logging.
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
#include "core/error.h"

namespace tr::distributed::store_io {

// ---- sockets --------------------------------------------------------------------------------

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return str(host, ":", serv);
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<int64_t>(left, 0, INT_MAX));
}

// One line, one write(): lines of concurrent writers do not interleave.
void log_line(const std::string& s) {
  std::string line = s + "\n";
  ssize_t r = ::write(2, line.data(), line.size());
  (void)r;
}

// Blocking send/recv on a non-blocking socket with a deadline; "" on success, else the reason.
std::string send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      n -= size_t(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      int k = ::poll(&pfd, 1, ms_until(deadline));
      if (k == 0) return "timed out sending the request";
      continue;
    }
    return str("send failed: ", std::strerror(errno));
  }
  return "";
}

std::string recv_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= size_t(r);
      continue;
    }
    if (r == 0) return "the store closed the connection";
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd, POLLIN, 0};
      int k = ::poll(&pfd, 1, ms_until(deadline));
      if (k == 0) return "no answer from the store in time";
      continue;
    }
    return str("receive failed: ", std::strerror(errno));
  }
  return "";
}

bool same_token(const std::string& a, const std::string& b) {
  // Constant time in the contents, so the token cannot be guessed byte by byte from timings.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace tr::distributed::store_io
