// Token shards (dataset = "tokens" over many files): mixed layouts, windows that never cross a
// shard's end, paths / globs / lists, damaged shards named, token ids checked as windows are read,
// opening without reading the tokens, the state checkpoints keep and what a change of it says.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include "core/error.h"
#include "data/data_state.h"
#include "data/dataloader.h"
#include "data/dataset_registry.h"
#include "data/shard_paths.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "unit/temp_dir.h"

namespace test_token_shards {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// Shard `id`'s tokens say where they are: id * 1000 + position.
std::vector<uint32_t> marked(uint32_t id, uint32_t n) {
  std::vector<uint32_t> t;
  for (uint32_t p = 0; p < n; ++p) t.push_back(id * 1000 + p);
  return t;
}

// llm.c's version 2: its header (version 2) and uint32 tokens, written here byte by byte.
std::vector<uint8_t> llmc_v2(const std::vector<uint32_t>& tokens) {
  std::vector<uint8_t> b = write_token_file({}, "llmc");
  b[4] = 2;
  for (int k = 0; k < 4; ++k) b[size_t(8 + k)] = uint8_t(tokens.size() >> (8 * k));
  for (uint32_t t : tokens)
    for (int k = 0; k < 4; ++k) b.push_back(uint8_t(t >> (8 * k)));
  return b;
}

// One shard of each layout (and a short one that gives no window at T = 8).
std::vector<std::string> mixed_shards(const TempDir& tmp) {
  write_bytes(tmp / "s0.bin", write_token_file(marked(0, 50), "nanogpt"));
  write_bytes(tmp / "s1.bin", write_token_file(marked(1, 37), "llmc"));
  write_bytes(tmp / "s2.bin", llmc_v2(marked(2, 5)));
  write_bytes(tmp / "s3.bin", llmc_v2(marked(3, 30)));
  return {tmp / "s0.bin", tmp / "s1.bin", tmp / "s2.bin", tmp / "s3.bin"};
}

std::vector<int64_t> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

}  // namespace

TEST_CASE("token shards: mixed layouts, every window inside one shard, strided and overlapping", "[data][tokens]") {
  TempDir tmp;
  TokenDataset::Options o;
  o.paths = mixed_shards(tmp);
  o.block_size = 8;
  const std::vector<int64_t> counts = {50, 37, 5, 30};
  for (bool overlapping : {false, true}) {
    DYNAMIC_SECTION((overlapping ? "overlapping" : "strided")) {
      o.overlapping = overlapping;
      TokenDataset d(o);
      CHECK(d.num_tokens() == 122);
      // strided: (n - 1) / 8 per shard; overlapping: n - 8; the 5-token shard gives none
      CHECK(d.size() == (overlapping ? 42 + 29 + 0 + 22 : 6 + 4 + 0 + 3));
      REQUIRE(d.short_shards().size() == 1);
      CHECK(d.short_shards()[0]->path == o.paths[2]);
      std::map<int64_t, std::set<int64_t>> starts;  // shard -> window starts seen
      for (int64_t i = 0; i < d.size(); ++i) {
        Example e = d.get(i);
        const std::vector<int64_t> x = values(e.input), y = values(e.target);
        const int64_t shard = x[0] / 1000, s = x[0] % 1000;
        for (int64_t k = 0; k < 8; ++k) {  // x and y: 9 consecutive tokens of one shard
          INFO("window " << i << " token " << k);
          REQUIRE(x[size_t(k)] == shard * 1000 + s + k);
          REQUIRE(y[size_t(k)] == shard * 1000 + s + k + 1);
        }
        CHECK(s + 8 < counts[size_t(shard)]);
        starts[shard].insert(s);
        const json at = json::parse(d.locate(i));
        CHECK(at ==
              json{{"window", i}, {"shard", shard}, {"file", "s" + std::to_string(shard) + ".bin"}, {"offset", s}});
      }
      // the shards in order, each cut as one stream would be
      for (int64_t k : {0, 1, 3}) {
        const int64_t n = counts[size_t(k)];
        CHECK(int64_t(starts[k].size()) == (overlapping ? n - 8 : (n - 1) / 8));
        CHECK(*starts[k].rbegin() == (overlapping ? n - 9 : ((n - 1) / 8 - 1) * 8));
      }
      CHECK(starts.count(2) == 0);
      // the batched read is the stacked single reads
      Example b = d.get_batch({0, d.size() - 1, 7});
      CHECK(values(b.input.select(0, 1)) == values(d.get(d.size() - 1).input));
      CHECK(values(b.target.select(0, 2)) == values(d.get(7).target));
      CHECK_THAT(d.describe(), Contains("4 shards") && Contains("1 nanogpt, 1 llmc v1, 2 llmc v2") &&
                                   Contains("122 tokens") && Contains("1 shard is shorter than block_size + 1"));
    }
  }
  // all shards too short: an error
  o.block_size = 50;
  CHECK_THAT(
      error_of([&] { TokenDataset d(o); }),
      Contains("none of the 4 shards holds one window of block_size + 1 = 51 tokens") && Contains("s0.bin, has 50"));
}

TEST_CASE("token shards: a path, a glob, a list, sorted, no match and a file twice are errors", "[data][tokens]") {
  TempDir tmp;
  for (const char* n : {"train_10.bin", "train_2.bin", "train_1.bin", "val.bin"})
    write_bytes(tmp / n, write_token_file(marked(1, 20), "llmc"));
  const std::string d = tmp.path.string();
  CHECK(expand_shard_paths({d + "/train_*.bin"}, "") ==
        std::vector<std::string>{d + "/train_1.bin", d + "/train_10.bin", d + "/train_2.bin"});  // byte order
  // a list keeps its order; each pattern's matches sorted
  CHECK(expand_shard_paths({d + "/train_2.bin", d + "/train_1*.bin"}, "") ==
        std::vector<std::string>{d + "/train_2.bin", d + "/train_1.bin", d + "/train_10.bin"});
  // relative entries: from the working directory, else from the config's
  CHECK(expand_shard_paths({"train_1?.bin"}, d) == std::vector<std::string>{d + "/train_10.bin"});
  CHECK(expand_shard_paths({"val.bin"}, d) == std::vector<std::string>{d + "/val.bin"});
  CHECK_THAT(error_of([&] {
               expand_shard_paths({d + "/train_*.bin", d + "/eval_*.bin"}, "");
             }),
             Contains("pattern '" + d + "/eval_*.bin' matches no file"));
  CHECK_THAT(error_of([&] { expand_shard_paths({"nope_*.bin"}, d); }),
             Contains("'nope_*.bin' matches no file") && Contains("config's directory '" + d + "'"));
  CHECK_THAT(error_of([&] {
               expand_shard_paths({d + "/train_1.bin", d + "/train_*.bin"}, "");
             }),
             Contains("names '" + d + "/train_1.bin' twice") && Contains("by '" + d + "/train_*.bin'"));
  CHECK_THAT(error_of([&] { expand_shard_paths({d + "/val.bin", d + "/./val.bin"}, ""); }), Contains("twice"));
  CHECK_THAT(error_of([&] { expand_shard_paths({}, ""); }), Contains("empty list"));

  // through [data]: a glob for train, a list for eval; the state names the training shards in order
  auto build = [&](const std::string& keys) {
    toml::table tt = toml::parse(keys + "block_size = 8\n");
    TomlTable t(tt, "cfg.toml", "[data]");
    DatasetContext ctx;
    ctx.input_shape = {8};
    ctx.config_dir = d;
    return Registry<DatasetType>::get().at("tokens").build(t, ctx);
  };
  DatasetSplits s = build("train = 'train_*.bin'\neval = ['val.bin']\n");
  CHECK(s.train->size() == 3 * 2);
  CHECK(s.eval->size() == 2);
  CHECK(json::parse(s.state) == json{{"token_shards",
                                      {{{"file", "train_1.bin"}, {"tokens", 20}},
                                       {{"file", "train_10.bin"}, {"tokens", 20}},
                                       {{"file", "train_2.bin"}, {"tokens", 20}}}}});
  CHECK(s.notes.empty());
  CHECK_THAT(error_of([&] { build("train = 'train_*.bin'\neval = ['val.bin', 'test_*.bin']\n"); }),
             Contains("cfg.toml:2:") && Contains("[data]: 'eval' pattern 'test_*.bin' matches no file"));
  CHECK_THAT(error_of([&] { build("train = []\neval = 'val.bin'\n"); }), Contains("'train' is an empty list"));
  // a shard too short for one window is a warning naming it
  write_bytes(tmp / "train_3.bin", write_token_file(marked(3, 4), "nanogpt"));
  DatasetSplits w = build("train = 'train_*.bin'\neval = 'val.bin'\n");
  REQUIRE(w.notes.size() == 1);
  CHECK_THAT(w.notes[0], Contains("[data] train: 1 of 4 token files hold fewer than block_size + 1 = 9 tokens") &&
                             Contains("train_3.bin (4 tokens)"));
}

TEST_CASE("token shards: a damaged shard is one error naming that file", "[data][tokens]") {
  TempDir tmp;
  TokenDataset::Options o;
  o.paths = mixed_shards(tmp);
  o.block_size = 8;
  const std::string bad = tmp / "bad.bin";
  o.paths.insert(o.paths.begin() + 2, bad);
  const std::vector<uint8_t> good = write_token_file(marked(9, 40), "llmc");
  auto opening = [&](std::vector<uint8_t> bytes, const std::string& format) {
    write_bytes(bad, bytes);
    o.format = format;
    return error_of([&] { TokenDataset d(o); });
  };
  std::vector<uint8_t> cut(good.begin(), good.end() - 7);
  CHECK_THAT(opening(cut, "auto"),
             Contains("token file " + bad) && Contains("the header says 40 tokens") && Contains("cut short"));
  std::vector<uint8_t> longer = good;
  longer.insert(longer.end(), {0, 0});
  CHECK_THAT(opening(longer, "auto"), Contains(bad) && Contains("bytes follow the tokens"));
  std::vector<uint8_t> count = good;
  count[8] = 41;  // the header's count
  CHECK_THAT(opening(count, "auto"), Contains(bad) && Contains("the header says 41 tokens"));
  std::vector<uint8_t> magic = good;
  magic[1] ^= 0x40;
  o.paths = {o.paths[1], bad, o.paths[4]};  // llm.c's files only: format = "llmc" for all
  CHECK_THAT(opening(magic, "llmc"), Contains(bad) && Contains("magic"));  // (auto would read it as nanoGPT's)
  CHECK_THAT(opening(std::vector<uint8_t>(good.begin(), good.begin() + 100), "auto"),
             Contains(bad) && Contains("shorter than llm.c's 1024-byte header"));
  CHECK_THAT(opening(std::vector<uint8_t>(81, 7), "nanogpt"), Contains(bad) && Contains("81 bytes is no whole number"));
  std::vector<uint8_t> version = good;
  version[4] = 3;
  CHECK_THAT(opening(version, "auto"), Contains(bad) && Contains("version 3"));
  std::filesystem::remove(bad);
  o.format = "auto";
  CHECK_THAT(error_of([&] { TokenDataset d(o); }), Contains("cannot open '" + bad + "': no such file"));
}

TEST_CASE("token shards: token ids are checked as windows are read, naming the shard and the offset",
          "[data][tokens]") {
  TempDir tmp;
  std::vector<uint32_t> ids = marked(0, 40);
  for (uint32_t& t : ids) t %= 100;
  ids[29] = 150;  // in shard 1, token 29: inside strided window 3 of that shard (tokens 24..32)
  write_bytes(tmp / "a.bin", write_token_file(std::vector<uint32_t>(40, 5), "nanogpt"));
  write_bytes(tmp / "b.bin", llmc_v2(ids));
  TokenDataset::Options o;
  o.paths = {tmp / "a.bin", tmp / "b.bin"};
  o.block_size = 8;
  o.vocab_size = 100;
  TokenDataset d(o);  // opening reads no token
  REQUIRE(d.size() == 4 + 4);
  for (int64_t i : {0, 3, 4, 5, 6}) CHECK_NOTHROW(d.get(i));
  const std::string want = "token file " + o.paths[1] +
                           ": token 29 is 150, outside the model's vocabulary of 100 (at byte " +
                           std::to_string(1024 + 29 * 4);
  CHECK_THAT(error_of([&] { d.get(7); }), Contains(want));
  CHECK_THAT(error_of([&] { d.get_batch({0, 7}); }), Contains(want));
  // as the target's last token only: window [21, 29] of the overlapping cut
  o.overlapping = true;
  TokenDataset every(o);
  CHECK_NOTHROW(every.get(32 + 20));
  CHECK_THAT(error_of([&] { every.get(32 + 21); }), Contains(want));
}

TEST_CASE("token shards: opening 50 shards of 10M tokens reads none of their tokens", "[data][tokens]") {
  TempDir tmp;
  const int64_t n = 10'000'000;
  std::vector<std::string> paths;
  for (int k = 0; k < 50; ++k) {
    // sparse files: the tokens are holes (zeros) that no one has read; half with llm.c's header
    const std::string p = tmp / ("shard_" + std::to_string(100 + k) + ".bin");
    const bool llmc = k % 2 == 1;
    if (llmc) {
      std::vector<uint8_t> header = write_token_file({}, "llmc");
      header[8] = uint8_t(n), header[9] = uint8_t(n >> 8), header[10] = uint8_t(n >> 16), header[11] = uint8_t(n >> 24);
      write_bytes(p, header);
    }
    const int fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t((llmc ? kLlmcHeaderBytes : 0) + size_t(n) * 2)) == 0);
    ::close(fd);
    paths.push_back(p);
  }
  TokenDataset::Options o;
  o.paths = paths;
  o.block_size = 1024;
  o.vocab_size = 50257;
  const auto t0 = std::chrono::steady_clock::now();
  TokenDataset d(o);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  INFO("opened 50 x 10M tokens in " << ms << " ms");
  CHECK(d.num_tokens() == 50 * n);
  CHECK(d.size() == 50 * ((n - 1) / 1024));
  // pages of the files in memory (mincore: the page cache's), past each mapping's first 64 KiB (the
  // header's page); MAP_POPULATE would have them all, the kernel's read-around MBs of them
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  auto resident = [&](const TokenShard& s, size_t from) {
    const size_t pages = (s.bytes.size + page - 1) / page;
    std::vector<unsigned char> in(pages);
    REQUIRE(::mincore(s.bytes.data, s.bytes.size, in.data()) == 0);
    size_t r = 0;
    for (size_t i = from / page; i < pages; ++i) r += in[i] & 1;
    return r;
  };
  size_t touched = 0;
  for (const TokenShard& s : d.shards()) touched += resident(s, 64 * 1024);
  CHECK(touched == 0);
  // reading a window brings its page in (the check above sees reads), and only it: a shuffled
  // window's 2 KB read no read-around
  const int64_t i = 7 * ((n - 1) / 1024) + 5000;  // shard 7, tokens from 5000 * 1024
  CHECK(values(d.get(i).input) == std::vector<int64_t>(1024, 0));
  const TokenShard& s7 = d.shards()[7];
  std::vector<unsigned char> in(1);
  const size_t byte = size_t(s7.view.tokens - s7.bytes.data) + 5000 * 1024 * 2;
  REQUIRE(::mincore(s7.bytes.data + byte / page * page, 1, in.data()) == 0);
  CHECK((in[0] & 1) == 1);
  CHECK(resident(s7, 64 * 1024) <= 2);
}

TEST_CASE("DataLoader::first_index: the first sample of a global batch, on any rank", "[data]") {
  struct Count : Dataset {
    int64_t size() const override { return 23; }
    Example get(int64_t i) const override { return {tr::full({1}, double(i)), tr::full({1}, 0.0)}; }
    std::string describe() const override { return "Count(23)"; }
  };
  auto ds = std::make_shared<Count>();
  for (bool shuffle : {false, true}) {
    DataLoaderOptions o;
    o.batch_size = 6;
    o.shuffle = shuffle;
    o.seed = 4;
    o.world_size = 2;
    o.rank = 1;
    DataLoader r1(ds, o);
    o.world_size = 1;
    o.rank = 0;
    DataLoader one(ds, o);
    for (int64_t epoch : {0, 3}) {
      const std::vector<RankBatch> plan = one.epoch_plan(epoch);
      REQUIRE(plan.size() == 4);
      for (int64_t b = 0; b < 4; ++b) {
        CHECK(one.first_index(epoch, b) == plan[size_t(b)].indices[0]);
        CHECK(r1.first_index(epoch, b) == plan[size_t(b)].indices[0]);
      }
      CHECK_FALSE(one.first_index(epoch, 4));
    }
    one.begin_epoch(3, 1);  // the epoch under way: its plan, not a new order
    CHECK(one.first_index(3, 2) == one.epoch_plan(3)[2].indices[0]);
    CHECK(one.first_index(0, 2) == one.epoch_plan(0)[2].indices[0]);
  }
}

TEST_CASE("data state: a changed shard set is named shard by shard", "[data][tokens]") {
  auto shards = [](std::vector<std::pair<std::string, int64_t>> v) {
    json l = json::array();
    for (auto& [f, n] : v) l.push_back({{"file", f}, {"tokens", n}});
    return json{{"token_shards", l}};
  };
  const json saved = shards({{"a.bin", 100}, {"b.bin", 200}, {"c.bin", 300}});
  CHECK_THAT(data_state_change(saved, shards({{"a.bin", 100}, {"b.bin", 200}})),
             Contains("3 shards then, 2 now") && Contains("1 shard gone (c.bin (300 tokens))"));
  CHECK_THAT(data_state_change(saved, shards({{"a.bin", 100}, {"b.bin", 150}, {"c.bin", 300}, {"d.bin", 9}})),
             Contains("1 shard added (d.bin (9 tokens))") && Contains("1 shard resized (b.bin: 200 tokens, now 150)"));
  CHECK_THAT(data_state_change(saved, shards({{"b.bin", 200}, {"a.bin", 100}, {"c.bin", 300}})),
             Contains("the same shards in another order"));
  CHECK_THAT(data_state_change(json{{"mean", {1.0}}}, json{{"mean", {2.0}}}),
             Contains("the training data gives other statistics than the checkpoint's") && Contains("[2.0]"));
}

}  // namespace test_token_shards
