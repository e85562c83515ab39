#include "distributed/hash_store.h"
#include <charconv>
#include "core/error.h"

namespace tr::distributed {

int64_t parse_counter(const std::string& key, const Bytes& value) {
  int64_t v = 0;
  const char* b = reinterpret_cast<const char*>(value.data());
  const char* e = b + value.size();
  auto [p, ec] = std::from_chars(b, e, v);
  TR_CHECK(!value.empty() && ec == std::errc() && p == e, "store add('", key,
           "'): the stored value is not an integer counter (", value.size(), " bytes)");
  return v;
}

Bytes format_counter(int64_t v) {
  std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

std::vector<std::string> HashStore::missing_locked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  return missing;
}

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout();
  // A deleted-and-reset key between the wake-up and the lookup just waits again.
  while (true) {
    auto it = data_.find(key);
    if (it != data_.end()) return it->second;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !data_.count(key))
      throw Error(str("store get('", key, "') timed out after ", timeout().count(),
                      " ms at HashStore: keys still missing: [", key, "]"));
  }
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    v = (it == data_.end() ? 0 : parse_counter(key, it->second)) + delta;
    data_[key] = format_counter(v);
  }
  changed_.notify_all();
  return v;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto missing = missing_locked(keys);
    if (missing.empty()) return;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      missing = missing_locked(keys);
      if (missing.empty()) return;
      throw Error(
          str("store wait timed out after ", timeout.count(), " ms at HashStore: keys still missing: ", missing));
    }
  }
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return missing_locked(keys).empty();
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

}  // namespace tr::distributed
