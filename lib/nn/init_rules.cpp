#include "nn/init_rules.h"
#include <cmath>
#include "core/grad_mode.h"
#include "ops/init.h"

namespace tr::nn {

const std::vector<std::string>& init_types() {
  static const std::vector<std::string> t{"normal",          "uniform",        "constant",       "zeros",        "ones",
                                          "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal"};
  return t;
}

std::vector<InitRule> parse_init_rules(const TomlTable& t, const std::string& key, bool allow_residual_scaling) {
  std::vector<InitRule> rules;
  const auto tables = t.get_tables(key);
  for (size_t i = 0; i < tables.size(); ++i) {
    const TomlTable& r = tables[i];
    InitRule rule;
    rule.where = str(r.location(), ": ", r.what());
    rule.select = ParamSelector::read(r);
    rule.type = r.get_choice("type", init_types(), "");
    if (rule.type.empty()) r.fail("type", str("is required: one of ", init_types()));
    const std::string& ty = rule.type;
    if (ty == "normal") {
      rule.mean = r.get_float("mean", 0.0);
      rule.std = r.get_float("std", 1.0);
      if (rule.std < 0) r.fail("std", str("must be at least 0, got ", rule.std));
      if (r.has("residual_scaling")) {
        if (!allow_residual_scaling)
          r.fail("residual_scaling", "is a rule of the model's [[init]] (it needs the model's number of blocks)");
        rule.residual_scaling = r.get_bool("residual_scaling", false);
      }
    } else if (ty == "uniform") {
      rule.a = r.get_float("a", 0.0);
      rule.b = r.get_float("b", 1.0);
      if (rule.b < rule.a) r.fail("b", str("= ", rule.b, " is below a = ", rule.a));
    } else if (ty == "constant") {
      rule.value = r.get_float("value");
    } else if (ty == "kaiming_uniform" || ty == "kaiming_normal") {
      rule.a = r.get_float("a", 0.0);
      rule.mode = r.get_choice("mode", {"fan_in", "fan_out"}, "fan_in");
      rule.nonlinearity = r.get_choice(
          "nonlinearity", {"linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"}, "leaky_relu");
    } else if (ty == "xavier_uniform" || ty == "xavier_normal") {
      rule.gain = r.get_float("gain", 1.0);
    }
    r.finish();
    rules.push_back(std::move(rule));
  }
  return rules;
}

namespace {

void draw(Tensor& t, const InitRule& r, int64_t n_layer) {
  const std::string& ty = r.type;
  if (ty == "normal") {
    const double std = r.residual_scaling ? r.std / std::sqrt(2.0 * double(n_layer)) : r.std;
    init::normal_(t, r.mean, std);
  } else if (ty == "uniform") {
    init::uniform_(t, r.a, r.b);
  } else if (ty == "constant") {
    init::constant_(t, r.value);
  } else if (ty == "zeros") {
    init::zeros_(t);
  } else if (ty == "ones") {
    init::ones_(t);
  } else if (ty == "kaiming_uniform" || ty == "kaiming_normal") {
    TR_CHECK(t.dim() >= 2, r.where, ": ", ty, " needs a tensor of at least 2 dims (its fan), got shape ", t.sizes());
    if (ty == "kaiming_uniform")
      init::kaiming_uniform_(t, r.a, nullptr, r.mode, r.nonlinearity);
    else
      init::kaiming_normal_(t, r.a, nullptr, r.mode, r.nonlinearity);
  } else {
    TR_CHECK(t.dim() >= 2, r.where, ": ", ty, " needs a tensor of at least 2 dims (its fans), got shape ", t.sizes());
    if (ty == "xavier_uniform")
      init::xavier_uniform_(t, r.gain);
    else
      init::xavier_normal_(t, r.gain);
  }
}

}  // namespace

void apply_init_rules(Module& m, const std::vector<InitRule>& rules, int64_t n_layer) {
  if (rules.empty()) return;
  const std::vector<ParamRef> params = list_parameters(m);
  NoGradGuard ng;
  for (const InitRule& r : rules) {
    TR_CHECK(!r.residual_scaling || n_layer > 0, r.where,
             ": residual_scaling divides std by sqrt(2 * n_layer), but "
             "the model has no transformer_block layers to count");
    check_selector(r.select, m, r.where);  // an unknown module kind is an error with the nearest one
    int64_t hits = 0;
    for (const ParamRef& p : params) {
      if (!selects(r.select, p)) continue;
      Tensor t = p.t.detach();
      draw(t, r, n_layer);
      ++hits;
    }
    TR_CHECK(hits > 0, r.where, " selects no parameter (", params.size(), " parameters: ",
             params.empty() ? std::string("none") : params.front().name() + (params.size() > 1 ? ", ..." : ""), ")");
  }
}

}  // namespace tr::nn
