// safetensors for Tensors: bit-exact round trips of every dtype, a file written by an independent
// Python writer (tests/fixtures/generators/safetensors_reader.py), dtypes we cannot hold, and lying files.
// The format layer's own cases (from memory) are in tests/asan/, run in the sanitizer build.
#include <catch2/catch.hpp>
#include "ops/factories.h"
#include "unit/temp_dir.h"
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include "io/safetensors.h"

namespace test_safetensors {

using namespace tr;
using namespace tr::io;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr DType kAll[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                          DType::I64, DType::I32, DType::U8,  DType::Bool};

// Values that are exact in every dtype (bool: nonzero -> true).
Tensor sample(const Shape& shape, DType dt, double shift) {
  std::vector<double> v(size_t(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    double x = double(i % 7) - 3 + shift;
    v[i] = dt == DType::U8 ? double((i * 37 + size_t(shift)) % 256) : dt == DType::Bool ? double(i % 3 == 0) : x;
  }
  return from_vector(v, shape, dt);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * ca.element_size()) == 0;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(v >> (8 * i)));
  return s;
}

std::string file_of(std::string header, size_t data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + std::string(data, '\x5a');
}

}  // namespace

TEST_CASE("safetensors: every dtype round-trips bit for bit", "[safetensors]") {
  TempDir dir;
  NamedTensorList out;
  for (DType dt : kAll) {
    std::string n = safetensors_dtype(dt);
    out.emplace_back(n + ".w", sample({2, 3, 4}, dt, 0.5));
    out.emplace_back(n + ".scalar", sample({}, dt, 1.25));
    out.emplace_back(n + ".empty", sample({0, 3}, dt, 0));
    out.emplace_back(n + ".t", sample({3, 5}, dt, 0.75).t());  // non-contiguous: saved as its values
  }
  std::string path = dir.file("all.safetensors");
  save_safetensors(path, out, {{"step", "120"}, {"format", "pt"}});
  std::map<std::string, std::string> meta;
  NamedTensorList back = load_safetensors(path, &meta);
  REQUIRE(back.size() == out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(out[i].first);
    CHECK(back[i].first == out[i].first);  // the given order is the file order
    CHECK(same_bytes(back[i].second, out[i].second));
    CHECK(back[i].second.is_contiguous());
  }
  CHECK(meta == std::map<std::string, std::string>{{"step", "120"}, {"format", "pt"}});
  // the file's layout: data 8-byte aligned, tensors back to back
  auto h = safetensors::read_header(path);
  CHECK(h.data_start() % 8 == 0);
  CHECK(h.tensors.front().begin == 0);
  CHECK(h.tensors.back().end == h.data_size);
}

TEST_CASE("safetensors: names keep the given order and the dtype map is one to one", "[safetensors]") {
  TempDir dir;
  NamedTensorList out = {{"z", ones({2})}, {"a", zeros({1}, DType::I64)}, {"layers.0.weight", full({2, 2}, 3.0)}};
  save_safetensors(dir.file("o.safetensors"), out);
  NamedTensorList back = load_safetensors(dir.file("o.safetensors"));
  REQUIRE(back.size() == 3);
  CHECK(back[0].first == "z");
  CHECK(back[1].first == "a");
  CHECK(back[2].first == "layers.0.weight");
  CHECK(back[2].second.tolist() == std::vector<double>{3, 3, 3, 3});
  for (DType dt : kAll) {
    CHECK(dtype_from_safetensors(safetensors_dtype(dt)) == dt);
    CHECK(from_safetensors(to_safetensors(dt)) == dt);
  }
}

TEST_CASE("safetensors: reads the file written by the independent Python writer", "[safetensors]") {
  // tests/fixtures/generators/safetensors_reader.py --make-fixture: the reference writer's layout (sorted by
  // dtype width, then name; header keys in offset order after __metadata__).
  std::map<std::string, std::string> meta;
  NamedTensorList t = load_safetensors(std::string(TRAINER_FIXTURES_DIR) + "/safetensors_torch.safetensors", &meta);
  CHECK(meta.at("format") == "pt");
  std::vector<std::string> names;
  for (auto& [n, _] : t) names.push_back(n);
  CHECK(names == std::vector<std::string>{"i64", "f64", "empty", "f32", "scalar", "i32", "bf16", "f16", "u8", "bool"});
  auto get = [&](const std::string& n) {
    for (auto& [k, v] : t)
      if (k == n) return v;
    FAIL("no tensor " << n);
    return Tensor();
  };
  CHECK(get("i64").dtype() == DType::I64);
  CHECK(get("i64").tolist() == std::vector<double>{-1099511627776.0, 7});
  CHECK(get("f64").tolist() == std::vector<double>{3.141592653589793, -2.718281828459045});
  CHECK(get("empty").sizes() == Shape{0, 4});
  CHECK(get("f32").sizes() == Shape{2, 3});
  CHECK(get("f32").tolist() == std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5});
  CHECK(get("scalar").dim() == 0);
  CHECK(get("scalar").item() == 42.0);
  CHECK(get("i32").tolist() == std::vector<double>{1, -2, 3, -4});
  CHECK(get("bf16").dtype() == DType::BF16);
  CHECK(get("bf16").tolist() == std::vector<double>{1.0, -3.5, 256.0});
  CHECK(get("f16").tolist() == std::vector<double>{1.5, -2.25, 65504.0});
  CHECK(get("u8").tolist() == std::vector<double>{0, 255, 128});
  CHECK(get("bool").dtype() == DType::Bool);
  CHECK(get("bool").tolist() == std::vector<double>{1, 0, 1});
}

TEST_CASE("safetensors: format dtypes without a tensor type are refused before any read", "[safetensors]") {
  TempDir dir;
  int16_t v[2] = {1, -1};
  std::string path = dir.file("i16.safetensors");
  float f[1] = {1};
  safetensors::write_file(path, {{"ok", safetensors::Dtype::F32, {1}, f, 4}, {"x", safetensors::Dtype::I16, {2}, v, 4}},
                          {});
  CHECK_THROWS_WITH(load_safetensors(path), Contains(path) && Contains("'x'") && Contains("I16") &&
                                                Contains("cannot load") && Contains("supported: F32"));
  CHECK_THROWS_WITH(dtype_from_safetensors("F8_E4M3"), Contains("no tensor type"));
  CHECK_THROWS_WITH(dtype_from_safetensors("U16"), Contains("no tensor type"));
  CHECK_THROWS_WITH(dtype_from_safetensors("float32"), Contains("unknown dtype 'float32'") && Contains("BF16"));
  // a zero-element shape may carry a dimension no int64 holds
  write_bytes(path, file_of(R"({"e":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})", 0));
  CHECK_THROWS_WITH(load_safetensors(path), Contains("'e'") && Contains("larger than int64"));
}

TEST_CASE("safetensors: lying files are clear errors naming the file and the tensor", "[safetensors]") {
  TempDir dir;
  const std::string a4 = R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})";
  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> words;
  };
  std::vector<Case> cases = {
      {"offsets past the end", file_of("{" + a4 + "}", 8), {"'a'", "past the end"}},
      {"overlap",
       file_of("{" + a4 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
       {"'b'", "overlaps"}},
      {"hole", file_of("{" + a4 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}})", 32), {"'b'", "hole"}},
      {"huge header length", le64(uint64_t(1) << 40) + "{}", {"exceeds the limit"}},
      {"header length past the file", le64(64) + "{}      ", {"past the end of the file"}},
      {"invalid JSON", file_of("{\"a\":", 0), {"not valid JSON"}},
      {"non-object JSON", file_of("[]", 0), {"JSON object"}},
      {"dtype/shape/size mismatch",
       file_of(R"({"a":{"dtype":"F64","shape":[4],"data_offsets":[0,16]}})", 16),
       {"'a'", "needs 32 bytes"}},
      {"negative shape",
       file_of(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16),
       {"'a'", "shape[0] is -4"}},
      {"non-integer shape",
       file_of(R"({"a":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})", 16),
       {"'a'", "shape[0]"}},
      {"unknown dtype",
       file_of(R"({"a":{"dtype":"Q8","shape":[4],"data_offsets":[0,4]}})", 4),
       {"'a'", "unknown dtype"}},
      {"truncated file", file_of("{" + a4 + "}", 10), {"'a'", "past the end"}},  // 6 of 16 data bytes cut
      {"data longer than the last tensor", file_of("{" + a4 + "}", 24), {"8 trailing bytes"}},
      {"empty file", "", {"shorter than the 8-byte header length"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].what);
    std::string path = dir.file("lie" + std::to_string(i) + ".safetensors");
    write_bytes(path, cases[i].bytes);
    try {
      load_safetensors(path);
      FAIL("accepted");
    } catch (const Error& e) {
      std::string msg = e.what();
      INFO(msg);
      CHECK_THAT(msg, Contains(path));
      for (const auto& w : cases[i].words) CHECK_THAT(msg, Contains(w));
    }
  }
  CHECK_THROWS_WITH(load_safetensors(dir.file("absent.safetensors")), Contains("cannot open"));
}

TEST_CASE("safetensors: save refuses what the format cannot say", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  CHECK_THROWS_WITH(save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}}),
                    Contains("duplicate tensor name 'a'"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", ones({1})}}), Contains("__metadata__"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"u", Tensor()}}), Contains("'u' is undefined"));
  CHECK_THROWS_WITH(save_safetensors(dir.file("no/dir/x.safetensors"), {{"a", ones({1})}}), Contains("cannot write"));
}

}  // namespace test_safetensors
