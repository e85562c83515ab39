// Data layer: the IDX reader on the real Fashion-MNIST and on broken files, the text and synthetic
// datasets, sampler determinism, DistributedSampler padding, world-size-independent global batches,
// and the DataLoader (drop_last, mid-epoch start, worker threads).
#include <catch2/catch.hpp>
#include <unistd.h>
#include <zlib.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include "data/dataloader.h"
#include "data/idx_dataset.h"
#include "data/sampler.h"
#include "data/synthetic_dataset.h"
#include "data/text_dataset.h"
#include "unit/temp_dir.h"

namespace test_data {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Fashion-MNIST train, loaded once for the whole suite.
std::shared_ptr<const IdxDataset> fmnist_train() {
  static auto ds = std::make_shared<const IdxDataset>(IdxDataset::fashion_mnist(true));
  return ds;
}

std::vector<uint8_t> be32(uint32_t v) { return {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)}; }
// An IDX file: magic, sizes, then `data_bytes` bytes (i % 251), gzipped unless `plain`.
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& sizes, int64_t data_bytes,
               bool plain = false) {
  std::vector<uint8_t> bytes = be32(magic);
  for (uint32_t s : sizes) {
    auto b = be32(s);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  for (int64_t i = 0; i < data_bytes; ++i) bytes.push_back(uint8_t(i % 251));
  if (plain) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  gzclose(f);
}
void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}
// Bit-identical: same dtype, shape and bytes (tr::equal goes through doubles and is slow on batches).
bool same(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), size_t(ca.numel()) * ca.element_size()) == 0;
}
std::vector<int64_t> i64s(const Tensor& t) {
  std::vector<int64_t> v;
  for (double d : t.tolist()) v.push_back(int64_t(d));
  return v;
}
std::string chars(const Tensor& t) {
  std::string s;
  for (double d : t.tolist()) s.push_back(char(d));
  return s;
}
std::vector<Batch> drain(DataLoader& dl) {
  std::vector<Batch> out;
  while (auto b = dl.next()) out.push_back(std::move(*b));
  return out;
}
void check_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("batch " << k);
    CHECK(a[k].index == b[k].index);
    CHECK(a[k].epoch == b[k].epoch);
    CHECK(a[k].indices == b[k].indices);
    CHECK(same(a[k].input, b[k].input));
    CHECK(same(a[k].target, b[k].target));
  }
}

// A dataset that only has get(): exercises the default stacking get_batch; throws at index `bad`.
class TinyDataset : public Dataset {
 public:
  explicit TinyDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    check_index(i);
    TR_CHECK(i != bad_, "TinyDataset: sample ", i, " is broken");
    return {full({2}, double(i), DType::F32), scalar_tensor(double(i % 3), DType::I64)};
  }
  std::string describe() const override { return str("TinyDataset(", n_, ")"); }

 private:
  int64_t n_, bad_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// IDX / Fashion-MNIST

TEST_CASE("Fashion-MNIST train loads with torchvision's numbers", "[data][idx]") {
  auto ds = fmnist_train();
  REQUIRE(ds->size() == 60000);
  CHECK(ds->images().sizes() == Shape{60000, 1, 28, 28});
  CHECK(ds->images().is_contiguous());
  CHECK(ds->labels().sizes() == Shape{60000});
  CHECK(ds->num_classes() == 10);
  CHECK_THAT(ds->describe(), Contains("60000 x [1, 28, 28]") && Contains("train-images-idx3-ubyte.gz"));

  // Expected values computed once from the same files with
  //   /usr/bin/python3 -c "import gzip, numpy as np; d='/usr/share/datasets/fashion-mnist/';
  //     X = np.frombuffer(gzip.open(d+'train-images-idx3-ubyte.gz').read(), np.uint8)[16:].reshape(-1, 28, 28);
  //     y = np.frombuffer(gzip.open(d+'train-labels-idx1-ubyte.gz').read(), np.uint8)[8:];
  //     print(y[:10], y[-3:], np.bincount(y), X[0, 14, 10:18], X[0].sum(), X[-1, 14, 10:18], X[-1].sum(),
  //           X.astype(np.int64).sum())"
  CHECK(i64s(ds->labels().slice(0, 0, 10)) == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(i64s(ds->labels().slice(0, 59997, 60000)) == std::vector<int64_t>{3, 0, 5});
  std::vector<int64_t> counts(10, 0);
  for (int64_t y : i64s(ds->labels())) counts[size_t(y)]++;
  CHECK(counts == std::vector<int64_t>(10, 6000));
  const std::vector<int64_t> row0 = {0, 0, 237, 226, 217, 223, 222, 219};  // X[0, 14, 10:18]
  const std::vector<int64_t> rowl = {34, 0, 3, 3, 0, 3, 0, 24};            // X[-1, 14, 10:18]
  CHECK(i64s(ds->images()[0][0][14].slice(0, 10, 18)) == row0);
  CHECK(i64s(ds->images()[59999][0][14].slice(0, 10, 18)) == rowl);
  CHECK(ds->images()[0].to(DType::I64).sum().item<int64_t>() == 76247);
  CHECK(ds->images()[59999].to(DType::I64).sum().item<int64_t>() == 16684);
  int64_t total = 0;
  const uint8_t* all = ds->images().data_ptr<uint8_t>();
  for (int64_t i = 0; i < ds->images().numel(); ++i) total += all[i];
  CHECK(total == 3431114169LL);

  // get(i): ToTensor's x.float() / 255 in f32; the target is an i64 scalar.
  Example e = ds->get(0);
  CHECK(e.input.sizes() == Shape{1, 28, 28});
  CHECK(e.input.dtype() == DType::F32);
  CHECK(e.target.dim() == 0);
  CHECK(e.target.dtype() == DType::I64);
  CHECK(e.target.item<int64_t>() == 9);
  const float* px = e.input.data_ptr<float>();
  CHECK(px[14 * 28 + 12] == 237.0f / 255.0f);
  CHECK(px[14 * 28 + 13] == 226.0f / 255.0f);
  CHECK(px[14 * 28 + 10] == 0.0f);

  // get_batch gathers the same rows as get().
  Example b = ds->get_batch({59999, 0, 7});
  CHECK(b.input.sizes() == Shape{3, 1, 28, 28});
  CHECK(i64s(b.target) == std::vector<int64_t>{5, 9, 2});
  CHECK(same(b.input[1], e.input));
  CHECK(same(b.input[0], ds->get(59999).input));
  CHECK(same(b.input[2], ds->get(7).input));
  CHECK_THROWS_WITH(ds->get(60000), Contains("index 60000 is out of range") && Contains("60000"));
  CHECK_THROWS_WITH(ds->get_batch({1, -1}), Contains("index -1 is out of range"));
}

TEST_CASE("Fashion-MNIST test split and Normalize", "[data][idx]") {
  const IdxDataset::Normalize norm{0.2860f, 0.3530f};
  IdxDataset test = IdxDataset::fashion_mnist(false, norm);
  REQUIRE(test.size() == 10000);
  // From the same python one-liner on t10k: y[:10], X[0, 14, 10:18].
  CHECK(i64s(test.labels().slice(0, 0, 10)) == std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  CHECK(i64s(test.images()[0][0][14].slice(0, 10, 18)) == std::vector<int64_t>{0, 0, 98, 136, 110, 109, 110, 162});
  // Normalize((0.2860,), (0.3530,)) after ToTensor, each step in f32 as torch does it.
  Tensor x0 = test.get(0).input;
  const float* px = x0.data_ptr<float>();
  CHECK(px[14 * 28 + 12] == (98.0f / 255.0f - 0.2860f) / 0.3530f);
  CHECK(px[14 * 28 + 10] == (0.0f - 0.2860f) / 0.3530f);
  CHECK_THAT(test.describe(), Contains("normalize=(0.286, 0.353)"));
}

TEST_CASE("IDX pixels: the vector loop rounds every byte value as the scalar ToTensor + Normalize", "[data][idx]") {
  TempDir tmp;
  const std::string images = tmp.file("v-images-idx3-ubyte.gz"), labels = tmp.file("v-labels-idx1-ubyte.gz");
  write_idx(images, 0x803, {3, 13, 13}, 3 * 169);  // bytes i % 251: every value 0..250, rows with a vector tail
  write_idx(labels, 0x801, {3}, 3);
  for (bool normalize : {false, true}) {
    const IdxDataset::Normalize norm{0.2860f, 0.3530f};
    IdxDataset ds(images, labels, normalize ? std::optional(norm) : std::nullopt);
    Tensor x = ds.get_batch({2, 0, 1}).input.contiguous();
    const float* px = x.data_ptr<float>();
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 169; ++k) {
        const int64_t i = (b == 0 ? 2 : b - 1) * 169 + k;
        float want = float(uint8_t(i % 251)) / 255.0f;
        if (normalize) want = (want - norm.mean) / norm.std;
        if (px[b * 169 + k] != want) FAIL("pixel " << b << "," << k << ": " << px[b * 169 + k] << " != " << want);
      }
  }
}

TEST_CASE("IDX errors name the file and what was expected", "[data][idx]") {
  TempDir tmp;
  const std::string good_images = tmp.file("images.gz"), good_labels = tmp.file("labels.gz");
  write_idx(good_images, 0x803, {10, 28, 28}, 10 * 784);
  write_idx(good_labels, 0x801, {10}, 10);
  IdxDataset ok(good_images, good_labels);
  CHECK(ok.size() == 10);
  CHECK(ok.images()[3][0][0][5].item<int64_t>() == (3 * 784 + 5) % 251);

  SECTION("missing file") {
    const std::string missing = tmp.file("nope-images-idx3-ubyte.gz");
    CHECK_THROWS_WITH(IdxDataset(missing, good_labels), Contains(missing) && Contains("no such file"));
  }
  SECTION("truncated data: fewer bytes than the header promises") {
    const std::string p = tmp.file("short.gz");
    write_idx(p, 0x803, {100, 28, 28}, 10 * 784);
    CHECK_THROWS_WITH(IdxDataset(p, good_labels), Contains(p) && Contains("truncated") && Contains("[100, 28, 28]") &&
                                                      Contains("78400 bytes") && Contains("found 7840"));
  }
  SECTION("truncated header") {
    const std::string p = tmp.file("stub.gz");
    write_idx(p, 0x803, {100}, 0);  // 3 dims declared, one size present
    CHECK_THROWS_WITH(IdxDataset(p, good_labels), Contains(p) && Contains("truncated") && Contains("3 dimensions"));
    const std::string tiny = tmp.file("tiny");
    write_text(tiny, "ab");
    CHECK_THROWS_WITH(IdxDataset(tiny, good_labels), Contains(tiny) && Contains("truncated") && Contains("2 bytes"));
  }
  SECTION("gzip stream cut off mid-way") {
    const std::string big = tmp.file("big.gz"), cut = tmp.file("cut.gz");
    write_idx(big, 0x803, {200, 28, 28}, 200 * 784);
    std::ifstream in(big, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write_text(cut, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_WITH(IdxDataset(cut, good_labels), Contains(cut) && Contains("truncated") && Contains("156800"));
  }
  SECTION("bad magic") {
    CHECK_THROWS_WITH(IdxDataset(good_labels, good_labels),
                      Contains(good_labels) && Contains("bad magic number 0x00000801, expected 0x00000803"));
    CHECK_THROWS_WITH(IdxDataset(good_images, good_images),
                      Contains("bad magic number 0x00000803, expected 0x00000801"));
    const std::string text = tmp.file("text.gz");
    write_text(text, "this is not an IDX file at all");
    CHECK_THROWS_WITH(IdxDataset(text, good_labels), Contains(text) && Contains("bad magic number 0x74686973"));
  }
  SECTION("image/label count mismatch") {
    const std::string labels12 = tmp.file("labels12.gz");
    write_idx(labels12, 0x801, {12}, 12);
    CHECK_THROWS_WITH(IdxDataset(good_images, labels12), Contains("count mismatch") && Contains(good_images) &&
                                                             Contains("10 images") && Contains("12 labels"));
  }
  SECTION("a header promising more than the file can hold, and trailing data") {
    const std::string huge = tmp.file("huge.gz");
    write_idx(huge, 0x803, {0xffffffffu, 0xffffffffu, 28}, 0);
    CHECK_THROWS_WITH(IdxDataset(huge, good_labels), Contains(huge) && Contains("truncated or corrupt"));
    const std::string longer = tmp.file("longer.gz");
    write_idx(longer, 0x801, {10}, 11);
    CHECK_THROWS_WITH(IdxDataset(good_images, longer), Contains(longer) && Contains("more data than the header"));
  }
  SECTION("uncompressed IDX files read as well") {
    const std::string plain = tmp.file("plain-images");
    write_idx(plain, 0x803, {10, 28, 28}, 10 * 784, /*plain=*/true);
    IdxDataset p(plain, good_labels);
    CHECK(same(p.images(), ok.images()));
  }
}

// ---------------------------------------------------------------------------------------------
// Text

TEST_CASE("TextDataset: windows, shift by one, split by position", "[data][text]") {
  TempDir tmp;
  write_text(tmp.file("a.txt"), "abcdefghij");
  write_text(tmp.file("b.txt"), "0123456789");
  TextDataset::Options o;
  o.paths = {tmp.file("a.txt"), tmp.file("b.txt")};
  o.block_size = 4;
  o.eval_fraction = 0.2;  // 20 tokens: the last 4 are eval
  TextDataset train(o);
  CHECK(train.corpus_tokens() == 20);
  CHECK(train.num_tokens() == 16);
  CHECK(train.size() == 3);  // (16 - 1) / 4 non-overlapping windows
  Example e = train.get(1);
  CHECK(e.input.dtype() == DType::I64);
  CHECK(chars(e.input) == "efgh");
  CHECK(chars(e.target) == "fghi");
  CHECK(chars(train.get(2).input) == "ij01");
  CHECK(chars(train.get(2).target) == "j012");
  CHECK_THROWS_WITH(train.get(3), Contains("index 3 is out of range"));

  o.overlapping = true;
  TextDataset all(train.corpus(), o);
  CHECK(all.size() == 12);  // n - T
  CHECK(chars(all.get(11).input) == "1234");
  CHECK(chars(all.get(11).target) == "2345");  // the last train token, never an eval one
  Example b = all.get_batch({11, 0});
  CHECK(b.input.sizes() == Shape{2, 4});
  CHECK(same(b.input[0], all.get(11).input));
  CHECK(same(b.target[1], all.get(0).target));

  o.overlapping = false;
  o.train = false;
  CHECK_THROWS_WITH(TextDataset(train.corpus(), o), Contains("eval split has 4 tokens") && Contains("5"));
  o.block_size = 3;
  TextDataset eval(train.corpus(), o);
  CHECK(eval.size() == 1);
  CHECK(chars(eval.get(0).input) == "678");
  CHECK(chars(eval.get(0).target) == "789");
}

TEST_CASE("TextDataset: globs skip .dat files, directories and symlinks already seen", "[data][text]") {
  TempDir tmp;
  write_text(tmp.file("one"), "hello ");
  write_text(tmp.file("one.dat"), std::string("\0\1\2", 3));
  fs::create_symlink(tmp.file("one"), tmp.file("one.u8"));
  write_text(tmp.file("two"), "world");
  fs::create_directories(tmp.path / "sub");
  auto files = expand_text_glob(tmp.file("*"));
  REQUIRE(files.size() == 2);
  CHECK(files[0] == tmp.file("one"));
  CHECK(files[1] == tmp.file("two"));
  TextDataset::Options o;
  o.paths = {tmp.file("t*"), tmp.file("one")};  // entries with wildcards expand in place
  o.block_size = 2;
  o.eval_fraction = 0.0;
  TextDataset ds(o);
  CHECK(std::string(ds.tokens(), ds.tokens() + ds.num_tokens()) == "worldhello ");
  CHECK_THROWS_WITH(expand_text_glob(tmp.file("*.none")), Contains("no text files match"));
}

TEST_CASE("TextDataset: the fortunes corpus", "[data][text]") {
  TextDataset::Options o;
  o.block_size = 64;
  TextDataset train(o);
  int64_t bytes = 0;
  std::set<std::string> names;
  for (const auto& f : train.files()) {
    CHECK(f.find(".dat") == std::string::npos);
    CHECK(!fs::is_symlink(f));  // the .u8 links all point at files already listed
    bytes += int64_t(fs::file_size(f));
    names.insert(f);
  }
  CHECK(names.size() == train.files().size());
  CHECK(train.files().size() >= 10);
  CHECK(train.corpus_tokens() == bytes);
  CHECK(bytes > 1000000);
  const int64_t n_eval = int64_t(double(bytes) * 0.1);
  CHECK(train.num_tokens() == bytes - n_eval);
  CHECK(train.size() == (bytes - n_eval - 1) / 64);
  o.train = false;
  TextDataset eval(train.corpus(), o);
  CHECK(eval.num_tokens() == n_eval);
  CHECK(eval.tokens() == train.tokens() + train.num_tokens());
  Example b = train.get_batch({5, train.size() - 1});
  CHECK(b.input.sizes() == Shape{2, 64});
  CHECK(same(b.input[1], train.get(train.size() - 1).input));
  CHECK(b.input.max().item<int64_t>() <= 255);
  CHECK_THAT(train.describe(), Contains("fortunes"));
}

// ---------------------------------------------------------------------------------------------
// Synthetic

TEST_CASE("SyntheticDataset is a pure function of its seed", "[data][synthetic]") {
  SyntheticDataset::Options o;
  o.input_shape = {3, 4};
  o.num_classes = 5;
  o.size = 200;
  o.seed = 11;
  SyntheticDataset a(o), b(o);
  CHECK(same(a.inputs(), b.inputs()));
  CHECK(same(a.targets(), b.targets()));
  CHECK(a.inputs().sizes() == Shape{200, 3, 4});
  CHECK(a.targets().min().item<int64_t>() >= 0);
  CHECK(a.targets().max().item<int64_t>() <= 4);
  std::set<int64_t> classes;
  for (int64_t y : i64s(a.targets())) classes.insert(y);
  CHECK(classes.size() == 5);
  o.seed = 12;
  SyntheticDataset c(o);
  CHECK(!same(a.inputs(), c.inputs()));
  Example e = a.get(7), bt = a.get_batch({3, 7});
  CHECK(e.input.sizes() == Shape{3, 4});
  CHECK(e.target.dim() == 0);
  CHECK(same(bt.input[1], e.input));
  CHECK(bt.target[1].item<int64_t>() == e.target.item<int64_t>());
  // Most examples sit nearest their own class centre: the task is learnable.
  Tensor x = a.inputs().reshape({200, 12});
  int64_t nearest_own = 0;
  for (int64_t i = 0; i < 200; ++i) {
    Tensor d = (a.centers() - x[i]).pow(2.0).sum({1});
    if (argmin(d).item<int64_t>() == a.targets()[i].item<int64_t>()) ++nearest_own;
  }
  CHECK(nearest_own > 140);
}

// ---------------------------------------------------------------------------------------------
// Samplers

TEST_CASE("RandomSampler: the order is a function of (seed, epoch) only", "[data][sampler]") {
  RandomSampler s(100, 7);
  std::vector<int64_t> e0 = s.indices();
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == SequentialSampler(100).indices());
  CHECK(e0 != SequentialSampler(100).indices());
  CHECK(s.indices() == e0);
  s.set_epoch(1);
  std::vector<int64_t> e1 = s.indices();
  CHECK(e1 != e0);
  s.set_epoch(0);
  CHECK(s.indices() == e0);  // no hidden state carried between epochs
  RandomSampler fresh(100, 7);
  fresh.set_epoch(1);
  CHECK(fresh.indices() == e1);
  CHECK(RandomSampler(100, 8).indices() != e0);
  CHECK(epoch_permutation(100, 7, 1) == e1);
  // DistributedSampler on one replica shuffles exactly like RandomSampler.
  DistributedSampler d(100, 1, 0, true, 7);
  d.set_epoch(1);
  CHECK(d.indices() == e1);
  CHECK(RandomSampler(0, 1).indices().empty());
}

TEST_CASE("DistributedSampler pads with the head or drops the tail, as torch", "[data][sampler]") {
  auto rank_indices = [](int64_t n, int64_t R, int64_t r, bool drop_last) {
    return DistributedSampler(n, R, r, false, 0, drop_last).indices();
  };
  // torch: DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)
  CHECK(rank_indices(10, 3, 0, false) == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(rank_indices(10, 3, 1, false) == std::vector<int64_t>{1, 4, 7, 0});
  CHECK(rank_indices(10, 3, 2, false) == std::vector<int64_t>{2, 5, 8, 1});
  CHECK(rank_indices(10, 3, 0, true) == std::vector<int64_t>{0, 3, 6});
  CHECK(rank_indices(10, 3, 2, true) == std::vector<int64_t>{2, 5, 8});
  CHECK(DistributedSampler(10, 3, 0, false, 0, true).size() == 3);
  CHECK(DistributedSampler(10, 3, 0, false, 0, false).size() == 4);
  // Padding longer than the data repeats it: [0, 1, 0, 1, 0].
  CHECK(rank_indices(2, 5, 2, false) == std::vector<int64_t>{0});
  CHECK(rank_indices(2, 5, 3, false) == std::vector<int64_t>{1});
  CHECK(rank_indices(2, 5, 4, false) == std::vector<int64_t>{0});
  CHECK(rank_indices(2, 5, 4, true).empty());
  CHECK_THROWS_WITH(DistributedSampler(10, 3, 3), Contains("Invalid rank 3"));

  // Shuffled: the ranks together cover the epoch; set_epoch reshuffles consistently on all ranks.
  for (bool drop_last : {false, true}) {
    for (int64_t epoch : {0, 1}) {
      std::vector<int64_t> all;
      for (int64_t r = 0; r < 4; ++r) {
        DistributedSampler s(103, 4, r, true, 5, drop_last);
        s.set_epoch(epoch);
        auto v = s.indices();
        CHECK(int64_t(v.size()) == s.size());
        all.insert(all.end(), v.begin(), v.end());
      }
      std::set<int64_t> distinct(all.begin(), all.end());
      INFO("drop_last " << drop_last << " epoch " << epoch);
      CHECK(all.size() == (drop_last ? 100u : 104u));
      CHECK(distinct.size() == (drop_last ? 100u : 103u));
      // Rank r's k-th index is position k * R + r of the padded permutation.
      std::vector<int64_t> perm = epoch_permutation(103, 5, epoch);
      DistributedSampler s1(103, 4, 1, true, 5, drop_last);
      s1.set_epoch(epoch);
      CHECK(s1.indices()[2] == perm[2 * 4 + 1]);
    }
  }
}

TEST_CASE("Global batches do not depend on the world size", "[data][sampler]") {
  const std::vector<int64_t> order = epoch_permutation(1000, 3, 2);  // 7 x 128 + 104
  for (bool drop_last : {false, true}) {
    auto one = shard_global_batches(order, 128, 1, 0, drop_last);
    CHECK(int64_t(one.size()) == (drop_last ? 7 : 8));
    for (int64_t R : {2, 4, 8}) {
      std::vector<std::vector<RankBatch>> ranks;
      for (int64_t r = 0; r < R; ++r) ranks.push_back(shard_global_batches(order, 128, R, r, drop_last));
      for (size_t b = 0; b < one.size(); ++b) {
        INFO("R " << R << " batch " << b << " drop_last " << drop_last);
        std::vector<int64_t> joined;
        for (int64_t r = 0; r < R; ++r) {
          const RankBatch& rb = ranks[size_t(r)][b];
          CHECK(rb.global_size == one[b].global_size);
          CHECK(rb.global_offset == int64_t(joined.size()));
          if (b < 7) CHECK(int64_t(rb.indices.size()) == 128 / R);  // full batches: exactly G / R each
          joined.insert(joined.end(), rb.indices.begin(), rb.indices.end());
        }
        CHECK(joined == one[b].indices);
      }
    }
  }
  // A last batch smaller than the world: some ranks get nothing, all ranks get the same batch count.
  auto last = global_batch_slice(SequentialSampler(10).indices(), 1, 8, 8, 7, false);
  CHECK(last.global_size == 2);
  CHECK(last.indices.empty());
  CHECK(global_batch_slice(SequentialSampler(10).indices(), 1, 8, 8, 1, false).indices == std::vector<int64_t>{9});
  CHECK_THROWS_WITH(shard_global_batches(order, 100, 3, 0, false), Contains("multiple of the world size 3"));
}

// ---------------------------------------------------------------------------------------------
// DataLoader

TEST_CASE("DataLoader: batch counts, shapes and drop_last", "[data][loader]") {
  auto ds = std::make_shared<TinyDataset>(10);
  DataLoader keep(ds, 3);
  CHECK(keep.size() == 4);
  auto batches = drain(keep);
  REQUIRE(batches.size() == 4);
  CHECK(batches[0].input.sizes() == Shape{3, 2});  // the default get_batch stacks get()
  CHECK(batches[0].target.sizes() == Shape{3});
  CHECK(batches[3].input.sizes() == Shape{1, 2});
  CHECK(batches[3].indices == std::vector<int64_t>{9});
  CHECK(i64s(batches[1].target) == std::vector<int64_t>{0, 1, 2});
  CHECK(keep.position() == DataLoader::Position{0, 4});
  CHECK(keep.epoch_done());
  CHECK(!keep.next().has_value());

  DataLoader drop(ds, 3, false, /*drop_last=*/true);
  CHECK(drop.size() == 3);
  CHECK(drain(drop).size() == 3);
  DataLoader exact(ds, 5, true, true, 1);
  CHECK(exact.size() == 2);
  DataLoader big(ds, 32, false, true);
  CHECK(big.size() == 0);
  CHECK(!big.next().has_value());
  CHECK_THROWS_WITH(DataLoader(ds, 0), Contains("batch_size should be a positive integer"));
}

TEST_CASE("DataLoader: epochs reshuffle, and an epoch's order depends only on (seed, epoch)", "[data][loader]") {
  auto ds = fmnist_train();
  DataLoader a(ds, 256, /*shuffle=*/true, false, /*seed=*/42);
  CHECK(a.size() == 235);  // ceil(60000 / 256)
  a.set_epoch(3);
  auto first = a.next();
  REQUIRE(first);
  CHECK(first->input.sizes() == Shape{256, 1, 28, 28});
  const std::vector<int64_t> perm = epoch_permutation(60000, 42, 3);
  CHECK(first->indices == std::vector<int64_t>(perm.begin(), perm.begin() + 256));
  CHECK(same(first->input, ds->get_batch(first->indices).input));
  a.set_epoch(4);
  auto other = a.next();
  CHECK(other->indices != first->indices);
  DataLoader b(ds, 256, true, false, 42);  // a fresh loader, straight to epoch 3
  b.set_epoch(3);
  CHECK(b.next()->indices == first->indices);
  DataLoader seq(ds, 256);
  CHECK(seq.next()->indices[255] == 255);  // first next() begins epoch 0
}

TEST_CASE("DataLoader: starting mid-epoch yields the tail of the full epoch", "[data][loader]") {
  auto ds = fmnist_train();
  for (int workers : {0, 2}) {
    INFO("workers " << workers);
    DataLoaderOptions o;
    o.batch_size = 2000;
    o.shuffle = true;
    o.seed = 9;
    o.num_workers = workers;
    DataLoader full(ds, o);
    full.set_epoch(2);
    std::vector<Batch> all;  // the full epoch: index lists for all, data for the tail only
    while (auto b = full.next()) {
      if (b->index < 27) b->input = b->target = Tensor();
      all.push_back(std::move(*b));
    }
    REQUIRE(all.size() == 30);
    DataLoader resumed(ds, o);
    resumed.begin_epoch(2, 27);
    CHECK(resumed.position() == DataLoader::Position{2, 27});
    auto tail = drain(resumed);
    check_same_batches(tail, std::vector<Batch>(all.begin() + 27, all.end()));
    CHECK(resumed.position() == DataLoader::Position{2, 30});
    // The position read mid-epoch restarts exactly there.
    DataLoader mid(ds, o);
    mid.set_epoch(2);
    mid.next();
    mid.next();
    DataLoader::Position p = mid.position();
    CHECK(p == DataLoader::Position{2, 2});
    DataLoader again(ds, o);
    again.begin_epoch(p.epoch, p.batch);
    CHECK(again.next()->indices == all[2].indices);
    resumed.begin_epoch(2, 30);  // at the end: nothing left
    CHECK(!resumed.next().has_value());
    CHECK_THROWS_WITH(resumed.begin_epoch(2, 31), Contains("start_batch 31 is out of range"));
  }
}

TEST_CASE("DataLoader: worker threads give the batches of the synchronous loader", "[data][loader]") {
  auto ds = fmnist_train();
  DataLoaderOptions o;
  o.batch_size = 1000;
  o.shuffle = true;
  o.drop_last = false;
  o.seed = 1;
  DataLoader sync(ds, o);
  o.num_workers = 2;
  DataLoader threaded(ds, o);
  for (int64_t epoch : {0, 1}) {
    sync.set_epoch(epoch);
    threaded.set_epoch(epoch);
    int64_t n = 0;
    while (auto a = sync.next()) {
      auto b = threaded.next();
      REQUIRE(b.has_value());
      check_same_batches({*a}, {*b});
      ++n;
    }
    CHECK(!threaded.next().has_value());
    CHECK(n == 60);
  }
  // Abandoning an epoch mid-way (new epoch, or destruction) stops the workers cleanly.
  threaded.set_epoch(5);
  threaded.next();
  threaded.set_epoch(6);
  CHECK(threaded.next()->epoch == 6);
  {
    DataLoader gone(ds, o);
    gone.set_epoch(0);
  }
  // A worker's error reaches the consumer at that batch.
  DataLoaderOptions t;
  t.batch_size = 2;
  t.num_workers = 3;
  DataLoader broken(std::make_shared<TinyDataset>(10, 5), t);
  CHECK(broken.next().has_value());
  CHECK(broken.next().has_value());
  CHECK_THROWS_WITH(broken.next(), Contains("sample 5 is broken"));
}

TEST_CASE("DataLoader: ranks of a world together see the batches of one process", "[data][loader]") {
  SyntheticDataset::Options so;
  so.input_shape = {4};
  so.size = 300;
  auto ds = std::make_shared<SyntheticDataset>(so);
  DataLoaderOptions o;
  o.batch_size = 128;
  o.shuffle = true;
  o.seed = 3;
  DataLoader single(ds, o);
  single.set_epoch(1);
  auto ref = drain(single);
  REQUIRE(ref.size() == 3);  // 128 + 128 + 44
  std::vector<std::vector<Batch>> ranks;
  for (int64_t r = 0; r < 2; ++r) {
    o.world_size = 2;
    o.rank = r;
    o.num_workers = int(r);  // one rank prefetching, the other not: same data either way
    DataLoader dl(ds, o);
    CHECK(dl.size() == 3);
    dl.set_epoch(1);
    ranks.push_back(drain(dl));
  }
  for (size_t b = 0; b < ref.size(); ++b) {
    INFO("batch " << b);
    CHECK(ranks[0][b].input.size(0) == ref[b].input.size(0) / 2);
    CHECK(ranks[0][b].global_size == ref[b].global_size);
    CHECK(same(cat({ranks[0][b].input, ranks[1][b].input}), ref[b].input));
    CHECK(same(cat({ranks[0][b].target, ranks[1][b].target}), ref[b].target));
  }
  o.rank = 0;
  o.batch_size = 99;
  CHECK_THROWS_WITH(DataLoader(ds, o), Contains("must be divisible by the world size 2"));
  // torch's way: a DistributedSampler per rank, local batches.
  DataLoaderOptions d;
  d.batch_size = 50;
  d.sampler = std::make_shared<DistributedSampler>(300, 2, 1, true, 3);
  DataLoader local(ds, d);
  CHECK(local.size() == 3);
  local.set_epoch(1);
  auto lb = drain(local);
  DistributedSampler expect(300, 2, 1, true, 3);
  expect.set_epoch(1);
  const std::vector<int64_t> mine = expect.indices();
  CHECK(std::vector<int64_t>(mine.begin(), mine.begin() + 50) == lb[0].indices);
  CHECK(lb[2].indices.size() == 50u);
}

}  // namespace test_data
