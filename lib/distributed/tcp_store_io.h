// The TCP store's wire encoding and socket helpers, shared by its server (tcp_store_server.cpp)
// and client (tcp_store.cpp). Internal to lib/distributed.
#pragma once
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include "core/error.h"
#include "core/little_endian.h"
#include "distributed/tcp_store.h"

namespace tr::distributed::store_io {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A client that connects but never says hello holds a socket; it is closed after this long.
inline constexpr auto kHelloWithin = std::chrono::seconds(30);
// A client waits this much longer than the server-side timeout before it gives up on the server.
inline constexpr auto kReplySlack = std::chrono::seconds(30);
// Per-connection buffers above this are released once empty.
inline constexpr size_t kKeepBuffer = 1 << 20;
// Server-side timeouts are capped so deadline arithmetic cannot overflow.
inline constexpr uint64_t kMaxTimeoutMs = 100ull * 365 * 24 * 3600 * 1000;

// ---- encoding -------------------------------------------------------------------------------

inline void put_u8(Bytes& b, uint8_t v) { b.push_back(v); }
inline void put_u64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
inline void put_str(Bytes& b, const uint8_t* p, size_t n) {
  put_le32(b, uint32_t(n));
  b.insert(b.end(), p, p + n);
}
inline void put_str(Bytes& b, const std::string& s) {
  put_str(b, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline void put_str(Bytes& b, const Bytes& v) { put_str(b, v.data(), v.size()); }
inline void put_keys(Bytes& b, const std::vector<std::string>& keys) {
  put_le32(b, uint32_t(keys.size()));
  for (const auto& k : keys) put_str(b, k);
}

// A malformed or oversized message: the connection that sent it is closed (and logged).
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the fields of one payload; running past its end or an oversized field is a ProtocolError.
struct Reader {
  const uint8_t* p;
  size_t n;
  size_t off = 0;

  void need(size_t k) {
    if (n - off < k) throw ProtocolError("truncated message");
  }
  uint8_t u8() {
    need(1);
    return p[off++];
  }
  uint32_t u32() {
    need(4);
    uint32_t v = le32(p + off);
    off += 4;
    return v;
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[off + i]) << (8 * i);
    off += 8;
    return v;
  }
  std::pair<const uint8_t*, uint32_t> field(uint32_t max, const char* what) {
    uint32_t len = u32();
    if (len > max) throw ProtocolError(str(what, " of ", len, " bytes exceeds the limit of ", max, " bytes"));
    need(len);
    const uint8_t* at = p + off;
    off += len;
    return {at, len};
  }
  std::string text(uint32_t max, const char* what) {
    auto [at, len] = field(max, what);
    return std::string(reinterpret_cast<const char*>(at), len);
  }
  Bytes bytes(uint32_t max, const char* what) {
    auto [at, len] = field(max, what);
    return Bytes(at, at + len);
  }
  std::vector<std::string> keys() {
    uint32_t count = u32();
    if (count > (n - off) / 4) throw ProtocolError(str("key count ", count, " exceeds the message"));
    std::vector<std::string> ks;
    ks.reserve(count);
    for (uint32_t i = 0; i < count; ++i) ks.push_back(text(wire::kMaxKeyBytes, "key"));
    return ks;
  }
  void end() {
    if (off != n) throw ProtocolError("trailing bytes in message");
  }
};

// ---- sockets --------------------------------------------------------------------------------

void set_nodelay(int fd);
std::string peer_name(int fd);
int ms_until(Clock::time_point deadline);
void log_line(const std::string& s);
std::string send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline);
std::string recv_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline);
bool same_token(const std::string& a, const std::string& b);

}  // namespace tr::distributed::store_io
