// Model files: TOML text -> layers with shape inference and their parameters -> the summary.
// Tensors over the harness's allocation cap (scripts/fuzz.sh sets ASan's max_allocation_size_mb)
// fail as the product's out-of-memory error does.
#include "fuzz_util.h"
#include "nn/model_file.h"
#include "toml/toml_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tr::fuzz::expect_clean_error([&] {
    toml::table t = tr::parse_toml_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz_model.toml");
    tr::TomlTable table(t, "fuzz_model.toml", "model");
    tr::nn::Model m = tr::nn::build_model(table);
    (void)tr::nn::model_summary(m);
  });
  return 0;
}
