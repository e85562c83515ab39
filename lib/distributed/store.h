// Store: the key-value store ranks rendezvous through (torch.distributed.Store): a TCP store
// served by the launcher (tcp_store.h), or an in-process one for tests. Values are bytes. Every
// blocking call has a timeout; running out of it is an Error naming the keys still missing.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tr::distributed {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits (up to timeout()) for the key, then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Adds `delta` to the integer stored at key (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists; an Error naming the missing ones after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  virtual bool check(const std::vector<std::string>& keys) = 0;  // all exist, without waiting
  virtual bool delete_key(const std::string& key) = 0;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 protected:
  std::chrono::milliseconds timeout_{std::chrono::seconds(300)};
};

}  // namespace tr::distributed
