// Image augmentations: RandomCrop with padding is a shift with fill, each offset equally likely;
// RandomHorizontalFlip mirrors with probability p; a sample's draws depend only on (seed, epoch,
// index, position in the list), so batches are the same across worker counts and rank splits.
#include <catch2/catch.hpp>
#include <map>
#include "data/dataloader.h"
#include "data/synthetic_dataset.h"
#include "data/random_crop.h"
#include "data/random_horizontal_flip.h"
#include "data/transforms.h"

namespace test_transforms {

using namespace tr;
using namespace tr::data;

namespace {

// [B, C, H, W] with element value 1000 * b + 100 * c + 10 * i + j (distinct, easy to trace).
Tensor traced_images(int64_t B, int64_t C, int64_t H, int64_t W) {
  Tensor x = empty({B, C, H, W}, DType::F32);
  float* d = x.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) d[((b * C + c) * H + i) * W + j] = float(1000 * b + 100 * c + 10 * i + j);
  return x;
}

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = from + i;
  return v;
}

float at(const Tensor& x, int64_t b, int64_t c, int64_t i, int64_t j) {
  return x.data_ptr<float>()[((b * x.size(1) + c) * x.size(2) + i) * x.size(3) + j];
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t k = 0; k < a.numel(); ++k)
    if (a.data_ptr<float>()[k] != b.data_ptr<float>()[k]) return false;
  return true;
}

}  // namespace

TEST_CASE("RandomCrop without padding at the input size is the identity", "[data][transforms]") {
  Tensor x = traced_images(3, 2, 5, 7);
  RandomCrop crop(5, 7, 0);
  CHECK(same_values(crop.apply(x, iota(3), 4, 1, 0), x));
}

TEST_CASE("RandomCrop with padding shifts each sample by a uniformly drawn offset, filling the border",
          "[data][transforms]") {
  const int64_t B = 2500, C = 2, H = 6, W = 5, p = 2;
  Tensor x = traced_images(B, C, H, W);
  RandomCrop crop(H, W, p, -7.0f);
  Tensor y = crop.apply(x, iota(B), 3, 42, 0);
  REQUIRE(y.sizes() == Shape{B, C, H, W});
  std::map<std::pair<int64_t, int64_t>, int> seen;
  for (int64_t b = 0; b < B; ++b) {
    // The window's top-left in padded coordinates, from the documented draws.
    const int64_t top = int64_t(sample_uniform(42, 0, 3, b, 0) * (2 * p + 1));
    const int64_t left = int64_t(sample_uniform(42, 0, 3, b, 2) * (2 * p + 1));
    ++seen[{top, left}];
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
          const int64_t si = top + i - p, sj = left + j - p;
          const float want = (si >= 0 && si < H && sj >= 0 && sj < W) ? at(x, b, c, si, sj) : -7.0f;
          REQUIRE(at(y, b, c, i, j) == want);
        }
  }
  // 25 offsets, 100 expected each: all occur, none wildly over- or under-represented.
  REQUIRE(seen.size() == 25);
  for (auto& [k, n] : seen) CHECK((n > 50 && n < 150));
}

TEST_CASE("RandomCrop to a smaller window and its errors", "[data][transforms]") {
  Tensor x = traced_images(4, 1, 8, 8);
  Tensor y = RandomCrop(5, 6, 0).apply(x, iota(4), 0, 0, 0);
  CHECK(y.sizes() == Shape{4, 1, 5, 6});
  CHECK_THROWS_WITH(RandomCrop(9, 8, 0).apply(x, iota(4), 0, 0, 0), Catch::Contains("larger than the padded input"));
  CHECK_THROWS_WITH(RandomCrop(8, 8, 0).apply(x, iota(3), 0, 0, 0), Catch::Contains("3 indices for a batch of 4"));
  CHECK_THROWS_WITH(RandomCrop(8, 8, -1), Catch::Contains("padding must be >= 0"));
  CHECK_THROWS_WITH(RandomCrop(8, 8, 0).apply(empty({4, 8, 8}, DType::F32), iota(4), 0, 0, 0),
                    Catch::Contains("[B, C, H, W]"));
}

TEST_CASE("RandomHorizontalFlip mirrors the width axis with probability p", "[data][transforms]") {
  const int64_t B = 4000, C = 2, H = 3, W = 5;
  Tensor x = traced_images(B, C, H, W);
  CHECK(same_values(RandomHorizontalFlip(0.0).apply(x, iota(B), 0, 9, 1), x));
  Tensor all = RandomHorizontalFlip(1.0).apply(x, iota(B), 0, 9, 1);
  for (int64_t j = 0; j < W; ++j) CHECK(at(all, 7, 1, 2, j) == at(x, 7, 1, 2, W - 1 - j));
  CHECK(same_values(RandomHorizontalFlip(1.0).apply(all, iota(B), 0, 9, 1), x));  // an involution

  Tensor half = RandomHorizontalFlip(0.5).apply(x, iota(B), 0, 9, 1);
  int flipped = 0;
  for (int64_t b = 0; b < B; ++b) {
    const bool f = at(half, b, 0, 0, 0) != at(x, b, 0, 0, 0);
    CHECK(f == (sample_uniform(9, 1, 0, b, 0) < 0.5));
    for (int64_t c = 0; c < C; ++c)  // every channel of a sample flips together
      CHECK(at(half, b, c, 1, 0) == at(x, b, c, 1, f ? W - 1 : 0));
    flipped += f;
  }
  CHECK((flipped > 1850 && flipped < 2150));
  CHECK_THROWS_WITH(RandomHorizontalFlip(1.5), Catch::Contains("p must be in [0, 1]"));
}

TEST_CASE("Transform draws depend on (seed, epoch, index, stream) only", "[data][transforms]") {
  const int64_t B = 64;
  Tensor x = traced_images(B, 1, 8, 8);
  std::vector<std::shared_ptr<const Transform>> ts = {std::make_shared<RandomCrop>(8, 8, 2),
                                                      std::make_shared<RandomHorizontalFlip>(0.5)};
  Tensor a = apply_transforms(ts, x, iota(B, 100), 2, 5);
  CHECK(same_values(a, apply_transforms(ts, x, iota(B, 100), 2, 5)));
  CHECK_FALSE(same_values(a, apply_transforms(ts, x, iota(B, 100), 3, 5)));  // the next epoch
  CHECK_FALSE(same_values(a, apply_transforms(ts, x, iota(B, 100), 2, 6)));  // another seed
  CHECK_FALSE(same_values(a, apply_transforms(ts, x, iota(B, 200), 2, 5)));  // other samples
  // A sample is augmented the same in any batch: sample 130 alone equals its row in the batch.
  Tensor one = apply_transforms(ts, x.narrow(0, 30, 1).contiguous(), {130}, 2, 5);
  CHECK(same_values(one, a.narrow(0, 30, 1).contiguous()));
  // The crop and the flip use separate streams: the flip's draw is not the crop's.
  int same = 0;
  for (int64_t i = 0; i < 1000; ++i) same += sample_uniform(5, 0, 2, i, 0) == sample_uniform(5, 1, 2, i, 0);
  CHECK(same == 0);
}

TEST_CASE("DataLoader transforms: the same batches with workers and across ranks", "[data][transforms][loader]") {
  SyntheticDataset::Options so;
  so.input_shape = {1, 6, 6};
  so.size = 200;
  auto ds = std::make_shared<SyntheticDataset>(so);
  DataLoaderOptions o;
  o.batch_size = 32;
  o.shuffle = true;
  o.seed = 11;
  o.transforms = {std::make_shared<RandomCrop>(6, 6, 1), std::make_shared<RandomHorizontalFlip>(0.5)};
  DataLoader plain(ds, o);
  o.num_workers = 2;
  DataLoader workers(ds, o);
  o.num_workers = 0;
  o.world_size = 2;
  o.rank = 0;
  DataLoader r0(ds, o);
  o.rank = 1;
  DataLoader r1(ds, o);
  DataLoaderOptions none = o;
  none.world_size = 1;
  none.rank = 0;
  none.transforms.clear();
  DataLoader untouched(ds, none);
  for (int64_t epoch : {0, 1}) {
    plain.begin_epoch(epoch);
    workers.begin_epoch(epoch);
    r0.begin_epoch(epoch);
    r1.begin_epoch(epoch);
    untouched.begin_epoch(epoch);
    int changed = 0;
    while (auto b = plain.next()) {
      auto w = workers.next();
      auto a0 = r0.next(), a1 = r1.next();
      auto u = untouched.next();
      REQUIRE((w && a0 && a1 && u));
      CHECK(same_values(b->input, w->input));
      CHECK(same_values(b->input, cat({a0->input, a1->input}, 0).contiguous()));
      changed += !same_values(b->input, u->input);
    }
    CHECK(changed > 0);
  }
}

}  // namespace test_transforms
