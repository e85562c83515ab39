// The TCP store server's state machine (internal to lib/distributed): connections, their buffered
// requests and replies, parked waits; implemented in tcp_store_server_impl.cpp. Separate from the
// socket setup in tcp_store_server.cpp so that a fuzz target (tests/fuzz/fuzz_store_server.cpp) can
// feed it bytes over socketpairs, calling process, expire and sweep as the poll loop (run) does.
#pragma once
#include <atomic>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include "distributed/tcp_store.h"
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
    bool dead = false;     // closed at the end of the loop iteration (so iterators stay valid)
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
  // Connections accepted per poll round: a connection storm cannot keep the loop in accept()
  // while the ranks' requests wait; the rest are still pending on the listening socket next round.
  static constexpr int kAcceptBurst = 32;
  uint64_t silent_unreported = 0;
  std::atomic<uint64_t> silent_total{0};
  Clock::time_point silent_report_due;

  std::string address() const { return host + ":" + std::to_string(port); }

  // The poll loop, until `stop`: accept, read, handle, flush, expire, sweep.
  void run();
  // Handles the complete requests buffered on a connection, up to the first one that parks.
  void process(uint64_t id);
  // Answers parked requests past their deadline with the keys still missing, and closes
  // connections that never said hello.
  void expire();
  // Forgets the connections marked dead (and their parked requests).
  void sweep();

 private:
  void report_silent(bool force = false);
  void refuse(Conn& c, const std::string& why);
  void flush(Conn& c);
  void reply(Conn& c, const Bytes& payload);
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys);
  void park(uint64_t id, Conn& c, std::vector<std::string> keys, uint64_t timeout_ms, bool is_get);
  void notify();
  int next_timeout_ms();
  void handle(uint64_t id, Conn& c, store_io::Reader& r);
  void handle_hello(Conn& c, store_io::Reader& r);
  void handle_set(Conn& c, store_io::Reader& r);
  void handle_get(uint64_t id, Conn& c, store_io::Reader& r);
  void handle_add(Conn& c, store_io::Reader& r);
  void handle_wait(uint64_t id, Conn& c, store_io::Reader& r);
  void handle_check(Conn& c, store_io::Reader& r);
  void handle_delete(Conn& c, store_io::Reader& r);
  void read_from(Conn& c);
  bool evict_oldest_unauthed();
  void accept_burst();
};

}  // namespace tr::distributed
