#include "nn/model_file.h"
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include "nn/init_rules.h"
#include "nn/param_selector.h"

namespace tr::nn {

namespace {

// Per-sample output shapes are recorded by running the builders; the summary walks the
// module tree and attaches them by path.
void summarise(Module& m, const std::string& path, const std::map<std::string, std::string>& alias_of,
               std::vector<LayerSummary>& out) {
  for (auto& [name, child] : m.named_children()) {
    std::string p = path.empty() ? name : path + "." + name;
    int64_t own = 0;
    std::string tied;
    for (auto& [n, t] : child->named_parameters(false)) {
      auto a = alias_of.find(p + "." + n);
      if (a == alias_of.end())
        own += t.numel();
      else
        tied += (tied.empty() ? "" : ", ") + n + " = " + a->second;
    }
    out.push_back({p, child->type_name(), child->extra_repr(), {}, own, tied});
    summarise(*child, p, alias_of, out);
  }
}

// The parameter named `target` in the model, through any of its names.
Tensor find_parameter(const Module& net, const std::string& target, const PendingTie& tie) {
  std::vector<std::string> names;
  for (const ParamRef& p : list_parameters(net))
    for (const auto& o : p.owners) {
      if (o.name == target) return p.t;
      names.push_back(o.name);
    }
  const std::string near = nearest_name(target, names);
  throw Error(str(tie.where, ": tie: the model has no parameter '", target, "'",
                  near.empty() ? "" : "; did you mean '" + near + "'?"));
}

// Resolves the layers' `tie` requests in the order written.
void tie_parameters(Module& net, const std::vector<PendingTie>& ties) {
  std::map<const Module*, std::string> path_of;
  for (auto& [p, mod] : net.named_modules()) path_of[mod] = p;
  for (const PendingTie& tie : ties) {
    const std::string& owner_path = path_of.at(tie.owner);
    const std::string name = owner_path.empty() ? tie.param : owner_path + "." + tie.param;
    Tensor target = find_parameter(net, tie.target, tie);
    TR_CHECK(!tie.owner->tensor(tie.param).is_same(target), tie.where, ": tie: '", name, "' and '", tie.target,
             "' are already one tensor");
    try {
      tie.owner->tie_parameter(tie.param, target);
    } catch (const Error& e) { throw Error(str(tie.where, ": tie ", name, " = \"", tie.target, "\": ", e.what())); }
  }
}

int64_t count_blocks(Module& net) {
  int64_t n = 0;
  for (auto& [p, mod] : net.named_modules()) n += mod->type_name() == "Block";
  return n;
}

}  // namespace

namespace {

std::string fmt_count(int64_t n) {
  std::string s = std::to_string(n), r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) r += ',';
    r += s[i];
  }
  return r;
}

}  // namespace

Model build_model(const TomlTable& t) {
  Model m;
  m.input.shape = t.get_ints("input");
  for (auto d : m.input.shape)
    if (d <= 0) t.fail("input", str("must list positive sizes, got ", m.input.shape));
  std::string dt = t.get_choice("input_dtype", {"float32", "int64"}, "float32");
  m.input.dtype = dt == "int64" ? DType::I64 : DType::F32;
  ShapeInfo io = m.input;
  // The top level is a sequential container; its layers record their output shapes as they build.
  std::vector<Shape> shapes;
  auto seq = std::make_shared<Sequential>();
  auto layers = t.get_tables("layers");
  if (layers.empty()) t.fail("layers", "must list at least one layer");
  TieCollector ties;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string type = layers[i].raw()["type"].value_or(std::string("?"));
    TomlTable l(layers[i].raw(), t.file(), str("layer ", i, " (", type, ")"));
    ModulePtr mod = build_layer(l, io);
    seq->push_back(mod, l.get_string("name", ""));
    shapes.push_back(io.shape);
  }
  // ties first, then the model's [[init]] rules (nanoGPT ties lm_head to wte before _init_weights)
  tie_parameters(*seq, ties.ties);
  // `init` is an array of rules (a run config's inline [model] may also hold init = "weights")
  if (const toml::node* n = t.node("init"); n && n->is_array())
    apply_init_rules(*seq, parse_init_rules(t, "init", true), count_blocks(*seq));
  t.finish();
  m.net = seq;
  m.output = io;
  std::map<std::string, std::string> alias_of;
  for (auto& [alias, first] : seq->tied_parameters()) alias_of[alias] = first;
  summarise(*seq, "", alias_of, m.layers);
  // top-level layers get their inferred output shapes
  size_t k = 0;
  for (auto& l : m.layers)
    if (l.path.find('.') == std::string::npos && k < shapes.size()) l.output = shapes[k++];
  return m;
}

Model load_model_file(const std::string& path) {
  toml::table tbl = parse_toml_file(path);
  TomlTable t(tbl, path, "model");
  return build_model(t);
}

std::string model_summary(const Model& m) {
  std::ostringstream os;
  char line[1024];
  int w = 22;  // the layer column: wider for long dotted paths ("transformer.h.11.attn.c_proj")
  for (auto& l : m.layers) w = std::max(w, int(l.path.size()));
  const std::string rule(size_t(w + 58), '-');
  std::snprintf(line, sizeof line, "%-*s %-22s %-22s %12s\n", w, "layer", "type", "output shape", "params");
  os << line << rule << "\n";
  std::snprintf(line, sizeof line, "%-*s %-22s %-22s %12s\n", w, "input", "", m.input.str().c_str(), "");
  os << line;
  for (auto& l : m.layers) {
    std::string shape = l.output.empty() && l.path.find('.') != std::string::npos ? "" : str(l.output);
    // read from the module now: [model] activation_checkpointing turns it on after the build
    const bool ckpt = m.net->get_submodule(l.path)->activation_checkpointing();
    std::snprintf(line, sizeof line, "%-*s %-22s %-22s %12s%s%s\n", w, l.path.c_str(), l.type.c_str(), shape.c_str(),
                  l.params ? fmt_count(l.params).c_str() : "", ckpt ? "  checkpointed" : "",
                  l.tied.empty() ? "" : ("  tied: " + l.tied).c_str());
    os << line;
  }
  os << rule << "\n";
  int64_t total = 0, trainable = 0;  // each tensor once: a tied parameter is one tensor
  for (auto& p : m.net->parameters()) {
    total += p.numel();
    trainable += p.requires_grad() ? p.numel() : 0;
  }
  os << "total parameters: " << fmt_count(total) << " (trainable " << fmt_count(trainable) << ")\n";
  os << "output per sample: " << m.output.str() << "\n";
  return os.str();
}

}  // namespace tr::nn
