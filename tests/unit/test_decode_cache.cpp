// The decode cache of gzipped dataset files: an entry is made on first read and mapped after; a
// changed source (stale) or a damaged entry (truncated, flipped bytes, foreign file) is never used:
// a note names it and the entry is rebuilt; a directory that cannot be written is a note, not an
// error. gunzip itself: several members, and the same bytes as zlib.
#include <catch2/catch.hpp>
#include <zlib.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include "data/decode_cache.h"
#include "data/gunzip.h"
#include "data/idx_dataset.h"
#include "unit/env_guard.h"
#include "unit/temp_dir.h"

namespace test_decode_cache {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// An IDX images file [n, 28, 28] of bytes (i * step) % 251, gzipped ("wb0": stored, not compressed,
// so the file's size does not depend on the bytes).
void write_images(const std::string& path, uint32_t n, int step = 1, const char* mode = "wb") {
  std::vector<uint8_t> b = {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28};
  b[4] = uint8_t(n >> 24), b[5] = uint8_t(n >> 16), b[6] = uint8_t(n >> 8), b[7] = uint8_t(n);
  for (int64_t i = 0; i < int64_t(n) * 784; ++i) b.push_back(uint8_t((i * step) % 251));
  gzFile f = gzopen(path.c_str(), mode);
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), unsigned(b.size())) == int(b.size()));
  gzclose(f);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.raw_data(), b.raw_data(), size_t(a.numel())) == 0;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += x + "\n";
  return s;
}

// Overwrites `n` bytes at `offset` of a file with 0x5a.
void scribble(const std::string& path, size_t offset, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  std::string junk(n, '\x5a');
  f.write(junk.data(), std::streamsize(n));
}

}  // namespace

TEST_CASE("decode cache: the first read stores an entry, later reads map it, same bytes", "[data][cache]") {
  TempDir tmp;
  const std::string src = tmp / "imgs.gz";
  write_images(src, 20);
  const Tensor plain = read_idx(src, IdxDataset::kImagesMagic);  // no cache
  DecodeCache c1(tmp / "cache");
  const std::string entry = c1.entry_path(src);
  CHECK_THAT(entry, Contains(tmp / "cache/imgs.gz."));
  CHECK_FALSE(fs::exists(entry));
  const Tensor first = read_idx(src, IdxDataset::kImagesMagic, &c1);
  CHECK(same_bytes(first, plain));
  CHECK(fs::exists(entry));
  CHECK(c1.notes().empty());
  // nothing but the entry: no temporary file left behind
  CHECK(std::distance(fs::directory_iterator(tmp / "cache"), fs::directory_iterator()) == 1);

  DecodeCache c2(tmp / "cache");
  std::optional<FileBytes> hit = c2.find(src);
  REQUIRE(hit);
  CHECK(hit->size == 16 + 20 * 784);
  Tensor second = read_idx(src, IdxDataset::kImagesMagic, &c2);
  CHECK(same_bytes(second, plain));
  CHECK(c2.notes().empty());
  // the tensor keeps its mapping alive after the file is gone
  fs::remove_all(tmp / "cache");
  hit.reset();
  CHECK(second[19][27][27].item<int64_t>() == (20 * 784 - 1) % 251);
}

TEST_CASE("decode cache: a changed source makes its entry stale, it is rebuilt, never used", "[data][cache]") {
  TempDir tmp;
  const std::string src = tmp / "imgs.gz";
  write_images(src, 10, 1, "wb0");
  DecodeCache cache(tmp / "cache");
  read_idx(src, IdxDataset::kImagesMagic, &cache);
  const std::string entry = cache.entry_path(src);
  std::string what;
  SECTION("other content and size") {
    write_images(src, 12);
    what = "size";
  }
  SECTION("same size and modification time, other content: the gzip trailer's CRC32 tells") {
    const auto mtime = fs::last_write_time(src);
    const auto size = fs::file_size(src);
    write_images(src, 10, 7, "wb0");
    fs::last_write_time(src, mtime);
    REQUIRE(fs::last_write_time(src) == mtime);
    REQUIRE(fs::file_size(src) == size);
    what = "last 8 bytes";
  }
  DecodeCache again(tmp / "cache");
  CHECK_FALSE(again.find(src));
  CHECK_THAT(joined(again.notes()), Contains("is stale") && Contains(entry) && Contains(src) && Contains(what));
  const Tensor now = read_idx(src, IdxDataset::kImagesMagic, &again);
  CHECK(same_bytes(now, read_idx(src, IdxDataset::kImagesMagic)));
  DecodeCache after(tmp / "cache");
  CHECK(after.find(src));  // rebuilt: valid again
  CHECK(after.notes().empty());
}

TEST_CASE("decode cache: a damaged entry is reported and rebuilt, never used", "[data][cache]") {
  TempDir tmp;
  const std::string src = tmp / "imgs.gz";
  write_images(src, 10);
  const Tensor want = read_idx(src, IdxDataset::kImagesMagic);
  DecodeCache cache(tmp / "cache");
  read_idx(src, IdxDataset::kImagesMagic, &cache);
  const std::string entry = cache.entry_path(src);
  const auto full = fs::file_size(entry);
  std::string why;
  SECTION("truncated") {
    fs::resize_file(entry, full - 100);
    why = "truncated";
  }
  SECTION("cut inside its header") {
    fs::resize_file(entry, 20);
    why = "truncated";
  }
  SECTION("a byte of the data changed") {
    scribble(entry, full - 5000, 1);
    why = "data checksum mismatch";
  }
  SECTION("a field of the header changed") {
    scribble(entry, 40, 1);  // inside the recorded data offset/size
    why = "header checksum mismatch";
  }
  SECTION("not an entry at all") {
    std::ofstream(entry, std::ios::trunc) << "some other file that happens to have this name, long enough for a header";
    why = "bad magic";
  }
  SECTION("longer than recorded") {
    std::ofstream(entry, std::ios::app) << "trailing";
    why = "truncated or padded";
  }
  DecodeCache again(tmp / "cache");
  const Tensor got = read_idx(src, IdxDataset::kImagesMagic, &again);
  CHECK(same_bytes(got, want));
  CHECK_THAT(joined(again.notes()),
             Contains("is damaged") && Contains(why) && Contains(entry) && Contains("rewriting"));
  CHECK(fs::file_size(entry) == full);  // rewritten whole
  DecodeCache after(tmp / "cache");
  CHECK(after.find(src));
  CHECK(after.notes().empty());
}

TEST_CASE("decode cache: an unwritable directory is a note, plain and damaged files store nothing", "[data][cache]") {
  TempDir tmp;
  const std::string src = tmp / "imgs.gz";
  write_images(src, 5);
  const Tensor want = read_idx(src, IdxDataset::kImagesMagic);
  SECTION("the directory is a file") {
    std::ofstream(tmp / "not_a_dir") << "x";
    DecodeCache cache(tmp / "not_a_dir");
    CHECK(same_bytes(read_idx(src, IdxDataset::kImagesMagic, &cache), want));
    CHECK_THAT(joined(cache.notes()), Contains("could not write the dataset cache entry") && Contains(src));
  }
  SECTION("an uncompressed IDX file is mapped as it is") {
    const std::string raw = tmp / "raw-idx";
    {
      gzFile f = gzopen(src.c_str(), "rb");
      std::vector<uint8_t> b(16 + 5 * 784);
      REQUIRE(gzread(f, b.data(), unsigned(b.size())) == int(b.size()));
      gzclose(f);
      std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    }
    DecodeCache cache(tmp / "cache");
    CHECK(same_bytes(read_idx(raw, IdxDataset::kImagesMagic, &cache), want));
    CHECK_FALSE(fs::exists(tmp / "cache"));
  }
  SECTION("a damaged gzip file throws as without a cache, and leaves no entry") {
    const std::string cut = tmp / "cut.gz";
    write_images(tmp / "big.gz", 200);
    std::ifstream in(tmp / "big.gz", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    DecodeCache cache(tmp / "cache");
    CHECK_THROWS_WITH(read_idx(cut, IdxDataset::kImagesMagic, &cache),
                      Contains(cut) && Contains("truncated") && Contains("156800") && Contains("zlib"));
    CHECK(fs::is_empty(tmp / "cache"));
  }
}

TEST_CASE("gunzip: concatenated members decode as gzip -d reads them, and are cached", "[data][cache]") {
  TempDir tmp;
  write_images(tmp / "a.gz", 3);
  const Tensor want = read_idx(tmp / "a.gz", IdxDataset::kImagesMagic);
  // the same bytes as two gzip members: the header and first image, then the rest
  const std::string two = tmp / "two.gz";
  {
    std::vector<uint8_t> raw(size_t(want.numel()) + 16);
    gzFile f = gzopen((tmp / "a.gz").c_str(), "rb");
    REQUIRE(gzread(f, raw.data(), unsigned(raw.size())) == int(raw.size()));
    gzclose(f);
    gzFile o = gzopen(two.c_str(), "wb");
    gzwrite(o, raw.data(), 16 + 784);
    gzclose(o);
    o = gzopen(two.c_str(), "ab");
    gzwrite(o, raw.data() + 16 + 784, unsigned(raw.size() - 16 - 784));
    gzclose(o);
  }
  CHECK(same_bytes(read_idx(two, IdxDataset::kImagesMagic), want));
  DecodeCache cache(tmp / "cache");
  CHECK(same_bytes(read_idx(two, IdxDataset::kImagesMagic, &cache), want));
  CHECK(cache.notes().empty());
  DecodeCache again(tmp / "cache");
  CHECK(again.find(two));
}

TEST_CASE("decode cache: the default directory follows TRAINER_CACHE_DIR, XDG_CACHE_HOME, HOME", "[data][cache]") {
  EnvGuard env;
  env.set("HOME", "/home/u");
  env.set("TRAINER_CACHE_DIR", std::nullopt);
  env.set("XDG_CACHE_HOME", std::nullopt);
  CHECK(DecodeCache::default_dir() == "/home/u/.cache/trainer/datasets");
  env.set("XDG_CACHE_HOME", "/xdg");
  CHECK(DecodeCache::default_dir() == "/xdg/trainer/datasets");
  env.set("TRAINER_CACHE_DIR", "/mine");
  CHECK(DecodeCache::default_dir() == "/mine");
}

}  // namespace test_decode_cache
