// GlooStore: lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) run over our
// Store, since Debian's Gloo has no TCP store of its own. Keys can be scoped by a prefix so that
// several process groups (or restarts) rendezvous on one store without colliding.
#pragma once
#include <gloo/rendezvous/store.h>
#include <string>
#include "distributed/store.h"

namespace tr::distributed {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `store` must outlive this adapter. An empty prefix uses the keys as Gloo names them.
  explicit GlooStore(tr::distributed::Store& store, std::string prefix = "");

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits up to the wrapped store's timeout() for the key.
  std::vector<char> get(const std::string& key) override;
  // Waits up to the wrapped store's timeout(); Gloo's own calls pass the context's timeout.
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::string scoped(const std::string& key) const;

  tr::distributed::Store& store_;
  std::string prefix_;
};

}  // namespace tr::distributed
