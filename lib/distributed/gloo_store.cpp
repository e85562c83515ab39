#include "distributed/gloo_store.h"

namespace tr::distributed {

GlooStore::GlooStore(tr::distributed::Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

std::string GlooStore::scoped(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "/" + key; }

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_.set(scoped(key), Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  Bytes v = store_.get(scoped(key));
  return std::vector<char>(v.begin(), v.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, store_.timeout()); }

// Our stores throw tr::Error naming the missing (scoped) keys and the store's address; that error
// passes through Gloo's connectFullMesh unchanged, so the caller sees which rank never joined.
void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> s;
  s.reserve(keys.size());
  for (const auto& k : keys) s.push_back(scoped(k));
  store_.wait(s, timeout);
}

}  // namespace tr::distributed
