// The safetensors format layer against lying headers, built with AddressSanitizer and UBSan: every
// bad file must be a clear error (naming the source, the tensor, the problem) and no byte may be read
// outside the buffer. Buffers are allocated at their exact size so that an overread is caught.
#include <catch2/catch.hpp>
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include "core/error.h"
#include "io/checksum.h"
#include "io/safetensors_format.h"

namespace test_safetensors_format {

using namespace tr::io;
using namespace tr::io::safetensors;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A heap block of exactly n bytes: one past the end is a redzone for ASan.
struct Bytes {
  std::unique_ptr<unsigned char[]> p;
  size_t n = 0;
  explicit Bytes(const std::string& s) : p(new unsigned char[s.size()]), n(s.size()) {
    std::memcpy(p.get(), s.data(), n);
  }
};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(v >> (8 * i)));
  return s;
}

// A file from a header text (padded to 8 unless told not to) and `data` bytes of 0..255.
std::string file_of(std::string header, size_t data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::string d(data, '\0');
  for (size_t i = 0; i < data; ++i) d[i] = char(i % 251);
  return le64(header.size()) + header + d;
}

Header parse_str(const std::string& file) {
  Bytes b(file);
  return parse(b.p.get(), b.n, "mem.safetensors");
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("trainer_asan_st_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return p;
  }
};

// A lying file and the words its error must contain.
struct Lie {
  const char* what;
  std::string file;
  std::vector<std::string> words;
};

std::vector<Lie> lies() {
  const std::string two = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)";
  return {
      {"offsets past the end",
       file_of(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
       {"'a'", "past the end"}},
      {"overlapping tensors",
       file_of(
           R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
           24),
       {"'b'", "overlaps", "'a'"}},
      {"the same range twice",
       file_of(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           8),
       {"overlaps"}},
      {"a hole",
       file_of(two + R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})", 24),
       {"hole of 8 bytes", "'b'"}},
      {"a hole before the first tensor",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
       {"hole", "before the first tensor 'a'"}},
      {"a huge header length", le64(uint64_t(1) << 62) + "{}", {"header length", "exceeds the limit"}},
      {"the largest header length", le64(~uint64_t(0)) + "{}      ", {"exceeds the limit"}},
      {"a header length past the file",
       le64(1000) + std::string(100, ' '),
       {"header length 1000", "past the end of the file"}},
      {"a header length one past the file", le64(9) + "{}      ", {"past the end of the file"}},
      {"invalid JSON", file_of(R"({"a": {"dtype": )", 0), {"not valid JSON"}},
      {"JSON with trailing garbage", file_of(R"({} x)", 0), {"not valid JSON"}},
      {"non-object JSON (array)", file_of("[1, 2, 3]", 0), {"JSON object"}},
      {"non-object JSON (string)", file_of(R"("hello")", 0), {"JSON object"}},
      {"an empty header", le64(0), {"JSON object"}},
      {"a header of NULs", le64(8) + std::string(8, '\0'), {"JSON object"}},
      {"NUL padding", le64(8) + std::string("{}") + std::string(6, '\0'), {"NUL byte at header offset 2"}},
      {"JSON hidden after a NUL",
       file_of(std::string("{}") + '\0' + R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1),
       {"NUL byte"}},
      {"invalid UTF-8 in a name",
       file_of("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0),
       {"not valid JSON"}},
      {"dtype and shape disagree with the size",
       file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20),
       {"'w'", "needs 24 bytes", "span 20"}},
      {"a negative dimension",
       file_of(R"({"w":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]}})", 8),
       {"'w'", "shape[0] is -1", "non-negative integer"}},
      {"a fractional dimension",
       file_of(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       {"'w'", "shape[0] is 2.5"}},
      {"a dimension as a string",
       file_of(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8),
       {"shape[0]"}},
      {"a dimension past u64",
       file_of(R"({"w":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})", 8),
       {"shape[0]"}},
      {"shape not an array", file_of(R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", 16), {"shape is 4"}},
      {"an element count overflowing u64",
       file_of(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})", 8),
       {"'w'", "overflows"}},
      {"a byte size overflowing u64",
       file_of(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8),
       {"'w'", "overflows"}},
      {"an unknown dtype",
       file_of(R"({"w":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8),
       {"'w'", "unknown dtype \"F17\"", "BF16"}},
      {"a lowercase dtype", file_of(R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8), {"unknown dtype"}},
      {"a dtype that is not a string",
       file_of(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", 8),
       {"dtype is 32"}},
      {"no dtype", file_of(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), {"'w'", "lacks \"dtype\""}},
      {"no data_offsets", file_of(R"({"w":{"dtype":"F32","shape":[2]}})", 8), {"lacks \"data_offsets\""}},
      {"three offsets", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})", 8), {"3 entries"}},
      {"negative offsets",
       file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
       {"data_offsets[0]"}},
      {"reversed offsets",
       file_of(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       {"end before they begin"}},
      {"an entry that is not an object", file_of(R"({"w":[1,2]})", 0), {"'w'", "expected an object"}},
      {"a duplicate tensor name",
       file_of(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           16),
       {"duplicate key \"a\""}},
      {"a duplicate field",
       file_of(R"({"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8),
       {"duplicate key \"dtype\""}},
      {"metadata that is not a string map",
       file_of(R"({"__metadata__":{"step":12}})", 0),
       {"__metadata__[\"step\"] is 12"}},
      {"metadata that is an array", file_of(R"({"__metadata__":["a"]})", 0), {"__metadata__ is"}},
      {"a sub-byte dtype off a byte boundary",
       file_of(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 8),
       {"not a whole number of bytes"}},
      {"data longer than the last tensor", file_of(two.substr(0, two.size() - 1) + "}", 16), {"8 trailing bytes"}},
      {"data but no tensors", file_of("{}", 8), {"8 trailing bytes"}},
      {"shorter than the length prefix", std::string("\x10\0\0", 3), {"shorter than the 8-byte header length"}},
  };
}

}  // namespace

TEST_CASE("format: every lying header is a clear error, read from memory", "[safetensors_format]") {
  for (const Lie& lie : lies()) {
    INFO(lie.what);
    try {
      parse_str(lie.file);
      FAIL("accepted: " << lie.what);
    } catch (const tr::Error& e) {
      std::string msg = e.what();
      INFO(msg);
      CHECK_THAT(msg, Contains("mem.safetensors"));
      for (const auto& w : lie.words) CHECK_THAT(msg, Contains(w));
    }
  }
}

TEST_CASE("format: every lying header is a clear error, read from a file", "[safetensors_format]") {
  TempDir dir;
  int i = 0;
  for (const Lie& lie : lies()) {
    INFO(lie.what);
    std::string path = dir.write("lie" + std::to_string(i++) + ".safetensors", lie.file);
    try {
      Reader r(path);
      FAIL("accepted: " << lie.what);
    } catch (const tr::Error& e) {
      std::string msg = e.what();
      INFO(msg);
      CHECK_THAT(msg, Contains(path));
      for (const auto& w : lie.words) CHECK_THAT(msg, Contains(w));
    }
  }
  CHECK_THROWS_WITH(Reader((dir.path / "absent.safetensors").string()), Contains("cannot open"));
  CHECK_THROWS_WITH(Reader(dir.path.string()), Contains("not a regular file"));
}

TEST_CASE("format: a truncated file is rejected at every length", "[safetensors_format]") {
  float a[3] = {1, 2, 3};
  int64_t b[2] = {4, 5};
  std::string full = serialize({{"a", Dtype::F32, {3}, a, 12}, {"b", Dtype::I64, {2}, b, 16}}, {{"k", "v"}});
  REQUIRE_NOTHROW(parse_str(full));
  for (size_t n = 0; n < full.size(); ++n) {
    INFO("length " << n);
    CHECK_THROWS_AS(parse_str(full.substr(0, n)), tr::Error);
  }
}

TEST_CASE("format: random byte flips never read out of bounds", "[safetensors_format]") {
  // Whatever the parser says about a damaged file, ASan checks that it never reads past it.
  float a[4] = {1, 2, 3, 4};
  uint8_t m[5] = {1, 2, 3, 4, 5};
  std::string full = serialize({{"w", Dtype::F32, {2, 2}, a, 16}, {"mask", Dtype::U8, {5}, m, 5}}, {{"step", "3"}});
  std::mt19937 rng(7);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string f = full;
    int flips = 1 + int(rng() % 3);
    for (int k = 0; k < flips; ++k) f[rng() % f.size()] = char(rng() % 256);
    try {
      Header h = parse_str(f);
      for (const auto& t : h.tensors) REQUIRE(h.data_start() + t.end <= f.size());
    } catch (const tr::Error&) { ++rejected; }
  }
  CHECK(rejected > 0);
}

TEST_CASE("format: valid headers parse into file order with metadata", "[safetensors_format]") {
  // listed out of offset order, with a zero-size tensor sharing an offset, and an unknown extra field
  std::string h =
      R"({"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},"__metadata__":{"format":"pt"},)"
      R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1},)"
      R"("s":{"dtype":"BF16","shape":[],"data_offsets":[16,18]},"q":{"dtype":"F4","shape":[4],"data_offsets":[18,20]}})";
  Header hd = parse_str(file_of(h, 20));
  REQUIRE(hd.tensors.size() == 5);
  CHECK(hd.tensors[0].name == "a");
  CHECK(hd.tensors[1].name == "e");
  CHECK(hd.tensors[2].name == "b");
  CHECK(hd.tensors[3].name == "s");
  CHECK(hd.tensors[3].shape.empty());
  CHECK(hd.tensors[3].numel() == 1);
  CHECK(hd.tensors[4].dtype == Dtype::F4);
  CHECK(hd.metadata.at("format") == "pt");
  CHECK(hd.data_size == 20);
  CHECK(hd.data_start() % 8 == 0);
  CHECK(hd.find("b")->dtype == Dtype::I64);
  CHECK(hd.find("zz") == nullptr);
  // "__metadata__": null is no metadata; "{}" is an empty file
  CHECK(parse_str(file_of(R"({"__metadata__":null})", 0)).metadata.empty());
  CHECK(parse_str(file_of("{}", 0)).tensors.empty());
  // unpadded headers are legal (alignment is the writer's courtesy, not a reader rule)
  CHECK(parse_str(file_of(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", 3, false)).tensors.size() == 1);
}

TEST_CASE("format: dtype names and widths follow the reference", "[safetensors_format]") {
  CHECK(kNumDtypes == 20);
  for (int i = 0; i < kNumDtypes; ++i) {
    auto d = Dtype(i);
    CHECK(dtype_from_name(dtype_name(d)) == d);
  }
  CHECK(dtype_bits(Dtype::F4) == 4);
  CHECK(dtype_bits(Dtype::F6_E3M2) == 6);
  CHECK(dtype_bits(Dtype::BOOL) == 8);
  CHECK(dtype_bits(Dtype::BF16) == 16);
  CHECK(dtype_bits(Dtype::C64) == 64);
  CHECK_FALSE(dtype_from_name("bf16"));
  CHECK_FALSE(dtype_from_name(""));
}

TEST_CASE("format: the writer's bytes equal the reference writer's", "[safetensors_format]") {
  // From huggingface safetensors' tests (test_serialization, test_serialization_forced_alignement,
  // test_empty): compact JSON, dtype/shape/data_offsets order, space padding to 8 bytes.
  float v[6] = {0, 1, 2, 3, 4, 5};
  std::string out = serialize({{"attn.0", Dtype::F32, {1, 2, 3}, v, 24}}, {});
  std::string want_header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  CHECK(out.substr(0, 8) == le64(64));
  CHECK(out.substr(8, 64) == want_header);
  CHECK(out.substr(72) == std::string(reinterpret_cast<const char*>(v), 24));

  std::string out2 = serialize({{"attn0", Dtype::F32, {1, 1, 2, 3}, v, 24}}, {});
  CHECK(out2.substr(0, 8) == le64(72));
  CHECK(out2.substr(8, 72) ==
        std::string(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})") + "       ");

  CHECK(serialize({}, {}) == le64(8) + "{}      ");
  CHECK(serialize({}, {{"framework", "pt"}}) == le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST_CASE("format: write, read back, and the writer's own checks", "[safetensors_format]") {
  TempDir dir;
  std::vector<uint16_t> h(7);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(1000 + i);
  double d[3] = {1.5, -2.5, 1e300};
  bool flags[3] = {true, false, true};
  std::vector<TensorData> ts = {{"layers.0.weight", Dtype::F16, {7}, h.data(), 14},
                                {"b", Dtype::F64, {3}, d, 24},
                                {"e", Dtype::F32, {0}, nullptr, 0},
                                {"flags", Dtype::BOOL, {3}, flags, 3},
                                {"odd.\xc3\xa9", Dtype::I16, {1}, h.data(), 2}};
  std::string path = (dir.path / "w.safetensors").string();
  write_file(path, ts, {{"step", "12"}});
  Reader r(path);
  REQUIRE(r.header().tensors.size() == 5);
  CHECK(r.header().metadata.at("step") == "12");
  CHECK(r.header().data_start() % 8 == 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = r.header().tensors[i];  // given order is file order
    CHECK(t.name == ts[i].name);
    CHECK(t.shape == ts[i].shape);
    std::vector<char> buf(t.nbytes() + 1);
    r.read(t, buf.data());
    CHECK(std::memcmp(buf.data(), ts[i].data ? ts[i].data : "", t.nbytes()) == 0);
  }
  CHECK(read_header(path).tensors.size() == 5);

  CHECK_THROWS_WITH(serialize({{"a", Dtype::F32, {2}, d, 4}}, {}), Contains("'a'") && Contains("8 bytes, but 4"));
  CHECK_THROWS_WITH(serialize({{"a", Dtype::F32, {1}, d, 4}, {"a", Dtype::F32, {1}, d, 4}}, {}), Contains("duplicate"));
  CHECK_THROWS_WITH(serialize({{"__metadata__", Dtype::F32, {1}, d, 4}}, {}), Contains("__metadata__"));
  CHECK_THROWS_WITH(serialize({{"\xff", Dtype::F32, {1}, d, 4}}, {}), Contains("cannot encode"));
  CHECK_THROWS_WITH(write_file((dir.path / "no/such/dir.st").string(), {}, {}), Contains("cannot write"));
}

TEST_CASE("format: a file that shrinks after opening fails the read, not the bounds", "[safetensors_format]") {
  TempDir dir;
  std::vector<float> v(1024, 1.0f);
  std::string path = (dir.path / "s.safetensors").string();
  write_file(path, {{"v", Dtype::F32, {1024}, v.data(), 4096}}, {});
  Reader r(path);
  fs::resize_file(path, 100);
  std::vector<float> out(1024);
  CHECK_THROWS_WITH(r.read(r.header().tensors[0], out.data()), Contains("ends at byte") && Contains(path));
  TensorInfo foreign{"x", Dtype::F32, {4096}, 0, 16384};
  CHECK_THROWS_WITH(r.read(foreign, out.data()), Contains("outside"));
}

TEST_CASE("checksum: zlib CRC-32, streamed over files", "[safetensors_format][checksum]") {
  const char* check = "123456789";
  CHECK(crc32_update(0, check, 9) == 0xcbf43926u);  // the CRC-32 check value
  CHECK(crc32_hex(0xcbf43926u) == "cbf43926");
  CHECK(crc32_hex(0x1u) == "00000001");
  CHECK(crc32_update(crc32_update(0, check, 4), check + 4, 5) == 0xcbf43926u);

  TempDir dir;
  std::string big(3 * (1 << 20) + 17, '\0');  // spans several read chunks
  std::mt19937 rng(3);
  for (auto& c : big) c = char(rng());
  std::string path = dir.write("big.bin", big);
  FileChecksum c = checksum_file(path);
  CHECK(c.size == big.size());
  CHECK(c.crc32 == crc32_update(0, big.data(), big.size()));
  CHECK(checksum_file(dir.write("empty.bin", "")).crc32 == 0);
  CHECK_THROWS_WITH(checksum_file((dir.path / "absent").string()), Contains("absent"));
}

}  // namespace test_safetensors_format
