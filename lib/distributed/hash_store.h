// HashStore: an in-process Store (a map under a mutex) for tests and single-process runs, with the
// same semantics and error messages as the TCP store: get and wait block up to their timeout.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include "distributed/store.h"

namespace tr::distributed {

class HashStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

// Shared by the stores: add() keeps counters as decimal text (as torch's stores do), so get() of a
// counter reads "3". Throws when the stored value is not such a number.
int64_t parse_counter(const std::string& key, const Bytes& value);
Bytes format_counter(int64_t v);

}  // namespace tr::distributed
