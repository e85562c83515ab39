// TCP store server: the listening socket, and the thread that runs the state machine
// (tcp_store_server_impl.cpp) until the server is destroyed. The format is described in tcp_store.h.
#include "distributed/tcp_store_server_impl.h"
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include "core/error.h"

namespace tr::distributed {

using namespace store_io;
using std::chrono::milliseconds;

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
uint64_t TCPStoreServer::silent_connections() const { return impl_->silent_total.load(); }

void TCPStoreServer::clear() {
  std::lock_guard<std::mutex> lock(impl_->data_mu);
  impl_->data.clear();
}

// ---- client ---------------------------------------------------------------------------------

}  // namespace tr::distributed
