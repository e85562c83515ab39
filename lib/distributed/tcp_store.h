// The rendezvous store over TCP (torch's TCPStore): TCPStoreServer runs in a thread of the launcher
// on node 0 (or of rank 0 when ranks are started by hand), TCPStore is each rank's client.
//
// Safety: every message size is bounded (a bigger one is a protocol error that drops only that
// connection), and every connection must open with a hello carrying the run's token; any other
// first message, or a wrong token, closes the connection and is logged on stderr. So a stray
// client (another run's rank, a port scanner) can neither read nor corrupt this run's keys.
//
// Waits are answered by the server when the keys appear (or with the missing keys at the
// deadline), so a waiting client sends one request and sleeps: no polling traffic.
//
// Wire format, integers little-endian:
//   frame   := u32 payload_size, payload            (payload_size <= kMaxFrameBytes;
//                                                     <= kMaxHelloFrameBytes before the hello)
//   str     := u32 n, n bytes                        (a key: n <= kMaxKeyBytes; a value: <= kMaxValueBytes)
//   request := u8 op, then
//     kHello: str token          kSet: str key, str value       kGet: str key, u64 timeout_ms
//     kAdd: str key, i64 delta   kWait: u32 n, n x str key, u64 timeout_ms
//     kCheck: u32 n, n x str key kDelete: str key
//   reply   := u8 status, then
//     kOk:      kGet: str value; kAdd: i64 new value; kCheck, kDelete: u8 bool; others nothing
//     kTimeout: u32 n, n x str key (the keys still missing)
//     kFailed:  str message (e.g. add on a value that is not a counter; the connection stays up)
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include "distributed/store.h"

namespace tr::distributed {

namespace wire {
inline constexpr uint32_t kMaxKeyBytes = 4096;
inline constexpr uint32_t kMaxValueBytes = 64u << 20;
inline constexpr uint32_t kMaxFrameBytes = kMaxValueBytes + kMaxKeyBytes + 64;
inline constexpr uint32_t kMaxHelloFrameBytes = kMaxKeyBytes + 16;
enum Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kAdd = 4, kWait = 5, kCheck = 6, kDelete = 7 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kFailed = 2 };
}  // namespace wire

class TCPStoreServer {
 public:
  // Binds host:port (port 0: a free one) and serves on its own thread until destroyed. Throws when
  // the address cannot be bound. An empty token turns the token check off (any hello is accepted).
  TCPStoreServer(const std::string& host, int port, std::string token);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const;
  const std::string& host() const;
  std::string address() const;  // "host:port", as errors name it
  // Forgets every key: a restarted group rendezvouses afresh on the same server.
  void clear();
  // Connections closed for a missing or wrong token, or for a protocol error (each logged).
  uint64_t refused_connections() const;
  // Connections that hung up before their hello (logged as a count, at most every 10 s).
  uint64_t silent_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class TCPStore : public Store {
 public:
  // Connects to host:port, retrying (the server may not be up yet) until connect_timeout, then
  // says hello with the token. Throws an Error naming the address when it cannot.
  TCPStore(std::string host, int port, std::string token,
           std::chrono::milliseconds connect_timeout = std::chrono::seconds(300));
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;

  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  // Sends one request and returns the reply payload (status byte first). Any I/O failure closes
  // the connection (the next call reconnects) and throws an Error naming `what` and the address.
  Bytes roundtrip(const Bytes& request, std::chrono::milliseconds reply_within, const std::string& what);
  void connect_locked(std::chrono::milliseconds within);
  void close_locked();

  std::string host_;
  int port_;
  std::string token_;
  std::mutex mu_;  // one request at a time on the connection
  int fd_ = -1;
};

}  // namespace tr::distributed
