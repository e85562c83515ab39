#include "nn/model_file.h"
#include <cstdio>
#include <sstream>

namespace tr::nn {

namespace {

// Per-sample output shapes are recorded by running the builders; the summary walks the
// module tree and attaches them by path.
void summarise(Module& m, const std::string& path, std::vector<LayerSummary>& out) {
  for (auto& [name, child] : m.named_children()) {
    std::string p = path.empty() ? name : path + "." + name;
    int64_t own = 0;
    for (auto& t : child->parameters(false)) own += t.numel();
    out.push_back({p, child->type_name(), child->extra_repr(), {}, own});
    summarise(*child, p, out);
  }
}

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
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string type = layers[i].raw()["type"].value_or(std::string("?"));
    TomlTable l(layers[i].raw(), t.file(), str("layer ", i, " (", type, ")"));
    ModulePtr mod = build_layer(l, io);
    seq->push_back(mod, l.get_string("name", ""));
    shapes.push_back(io.shape);
  }
  t.finish();
  m.net = seq;
  m.output = io;
  summarise(*seq, "", m.layers);
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
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-22s %-22s %12s\n", "layer", "type", "output shape", "params");
  os << line << std::string(80, '-') << "\n";
  std::snprintf(line, sizeof line, "%-22s %-22s %-22s %12s\n", "input", "", m.input.str().c_str(), "");
  os << line;
  int64_t total = 0;
  for (auto& l : m.layers) {
    total += l.params;
    std::string shape = l.output.empty() && l.path.find('.') != std::string::npos ? "" : str(l.output);
    // read from the module now: [model] activation_checkpointing turns it on after the build
    const bool ckpt = m.net->get_submodule(l.path)->activation_checkpointing();
    std::snprintf(line, sizeof line, "%-22s %-22s %-22s %12s%s\n", l.path.c_str(), l.type.c_str(), shape.c_str(),
                  l.params ? fmt_count(l.params).c_str() : "", ckpt ? "  checkpointed" : "");
    os << line;
  }
  os << std::string(80, '-') << "\n";
  int64_t trainable = 0;
  for (auto& p : m.net->parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  os << "total parameters: " << fmt_count(total) << " (trainable " << fmt_count(trainable) << ")\n";
  os << "output per sample: " << m.output.str() << "\n";
  return os.str();
}

}  // namespace tr::nn
