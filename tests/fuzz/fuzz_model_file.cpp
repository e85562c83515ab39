// Model files: TOML text -> layers with shape inference and their parameters -> the summary.
// Building a model allocates and initialises its parameters, which under ASan costs far more than
// the parsing and shape checks this target is for; so integers in (64, 2^24] are scaled down to
// 1..64 before the build (the same code paths, small tensors). Larger ones are kept: they reach the
// overflow checks, and their tensors exceed the harness's allocation cap (scripts/fuzz.sh) and fail
// at once as the product's out-of-memory error.
#include "fuzz_util.h"
#include "nn/model_file.h"
#include "toml/toml_table.h"

namespace {

void scale_down(toml::node& n) {
  if (auto* t = n.as_table())
    for (auto&& [k, v] : *t) scale_down(v);
  else if (auto* a = n.as_array())
    for (auto& v : *a) scale_down(v);
  else if (auto* i = n.as_integer()) {
    const int64_t v = i->get();
    if (v > 64 && v <= (int64_t(1) << 24)) *i = (v - 1) % 64 + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tr::fuzz::expect_clean_error([&] {
    toml::table t = tr::parse_toml_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz_model.toml");
    scale_down(t);
    tr::TomlTable table(t, "fuzz_model.toml", "model");
    tr::nn::Model m = tr::nn::build_model(table);
    (void)tr::nn::model_summary(m);
  });
  return 0;
}
