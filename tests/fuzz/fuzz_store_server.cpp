// The rendezvous store server's message handling (TCPStoreServer::Impl), driven as its poll loop
// drives it but over socketpairs: the input is a sequence of chunks, each [u8 c][u8 n][n bytes]:
// the bytes arrive on connection c % 4 (opened on first use; with c & 0x80, its first bytes are a
// correct hello, so the fuzzer reaches the requests past the token check); c & 0x40 hangs the
// connection up instead. Replies are drained and their framing checked.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <map>
#include "distributed/tcp_store_server_impl.h"
#include "fuzz_util.h"

namespace {

using tr::distributed::TCPStoreServer;
namespace wire = tr::distributed::wire;
namespace io = tr::distributed::store_io;

// Reads every reply frame waiting on the client end; each must be a whole frame led by a status.
void drain(int fd, tr::distributed::Bytes& pending) {
  uint8_t buf[4096];
  while (true) {
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r <= 0) break;
    pending.insert(pending.end(), buf, buf + r);
  }
  size_t pos = 0;
  while (pending.size() - pos >= 4) {
    uint32_t len = tr::le32(pending.data() + pos);
    if (pending.size() - pos - 4 < len) break;
    if (len == 0 || pending[pos + 4] > wire::kFailed) __builtin_trap();
    pos += 4 + len;
  }
  pending.erase(pending.begin(), pending.begin() + std::ptrdiff_t(pos));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  TCPStoreServer::Impl s;
  s.host = "fuzz";
  s.token = "run-token";
  std::map<int, uint64_t> id_of;  // connection index -> server id
  std::map<uint64_t, int> client_fd;
  std::map<uint64_t, tr::distributed::Bytes> replies;
  size_t at = 0;
  while (size - at >= 2) {
    const uint8_t c = data[at], n = data[at + 1];
    at += 2;
    const size_t take = std::min<size_t>(n, size - at);
    const int k = c % 4;
    auto found = id_of.find(k);
    if (found == id_of.end() || !s.conns.count(found->second)) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) __builtin_trap();
      TCPStoreServer::Impl::Conn conn;
      conn.fd = sv[0];
      conn.peer = "fuzz client " + std::to_string(k);
      conn.hello_deadline = io::Clock::now() + io::kHelloWithin;
      if (c & 0x80) {
        tr::distributed::Bytes hello{wire::kHello};
        io::put_str(hello, s.token);
        tr::put_le32(conn.in, uint32_t(hello.size()));
        conn.in.insert(conn.in.end(), hello.begin(), hello.end());
      }
      const uint64_t id = s.next_id++;
      s.conns.emplace(id, std::move(conn));
      id_of[k] = id;
      client_fd[id] = sv[1];
    }
    const uint64_t id = id_of[k];
    TCPStoreServer::Impl::Conn& conn = s.conns.at(id);
    if (c & 0x40) {
      conn.dead = true;  // what poll reports as a hang-up
    } else {
      conn.in.insert(conn.in.end(), data + at, data + at + take);
      at += take;
      if (!conn.waiting) s.process(id);
    }
    // the rest of one turn of the poll loop
    s.expire();
    while (!s.resumed.empty()) {
      auto batch = std::move(s.resumed);
      s.resumed.clear();
      for (uint64_t r : batch)
        if (!s.conns.at(r).dead) s.process(r);
    }
    s.sweep();
    for (auto& [cid, fd] : client_fd) drain(fd, replies[cid]);
  }
  for (auto& [cid, conn] : s.conns) ::close(conn.fd);
  for (auto& [cid, fd] : client_fd) ::close(fd);
  return 0;
}
