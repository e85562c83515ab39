// The differences between two resolved run configs, for resuming: a change that would break an
// exact continuation (model, data, optimizer, scheduler, seed, accumulation) is refused; changes
// to cadence and length (log, eval, checkpoint, steps, epochs, threads) are harmless.
#pragma once
#include <toml++/toml.h>
#include <string>
#include <vector>

namespace tr::config {

struct ConfigChange {
  std::string key;      // dotted: "optimizer.lr", "train.log_every"
  std::string before;   // the value as TOML ("(absent)" when missing)
  std::string after;
  bool harmless = false;
  std::string str() const { return key + ": " + before + " -> " + after; }
};

// Every key whose value differs between `saved` and `now` (both resolved configs), in key order.
std::vector<ConfigChange> diff_configs(const toml::table& saved, const toml::table& now);
// Whether changing `key` keeps a resumed run exact.
bool harmless_change(const std::string& key);

}  // namespace tr::config
