// The differences between two resolved run configs, for resuming: a change that would break an
// exact continuation (model, data, optimizer, scheduler, seed, accumulation) is refused; changes
// to cadence and length (log, eval, checkpoint, steps, epochs, threads) are harmless.
#pragma once
#include <toml++/toml.h>
#include <string>
#include <vector>

namespace tr::config {

struct ConfigChange {
  std::string key;     // dotted: "optimizer.lr", "train.log_every"
  std::string before;  // the value as TOML ("(absent)" when missing)
  std::string after;
  bool harmless = false;
  std::string str() const { return key + ": " + before + " -> " + after; }
};

// Every key whose value differs between `saved` and `now` (both resolved configs), in key order,
// except where a config written by an earlier version lacks or has a key only because of what
// that version wrote, not because the run differs:
//  - a key only `now` has that `now_source` (the config as written, after overrides) does not set:
//    it holds its default, which keeps the behaviour from before the key existed (e.g. [loss]);
//  - an [optimizer] key only `saved` has that is no hyperparameter of the (unchanged) optimizer
//    type: earlier resolved configs listed every optimizer's keys, which this type never read.
// Without `now_source` every difference counts.
std::vector<ConfigChange> diff_configs(const toml::table& saved, const toml::table& now,
                                       const toml::table* now_source = nullptr);
// Whether changing `key` keeps a resumed run exact.
bool harmless_change(const std::string& key);

}  // namespace tr::config
