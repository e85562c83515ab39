// FlopCounter: 2 x multiply-adds of matrix products and convolutions, forward and backward, counted
// once per op (not again for ops that a kernel dispatches inside), nested counters see the same.
#include <catch2/catch.hpp>
#include "core/grad_mode.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"

namespace test_flop_counter {

using namespace tr;

TEST_CASE("FlopCounter counts matrix products and convolutions", "[flops]") {
  Tensor a = ones({3, 4}), b = ones({4, 5});
  {
    FlopCounter c;
    mm(a, b);
    CHECK(c.flops() == 2.0 * 3 * 4 * 5);
    a + a;  // pointwise ops count nothing
    CHECK(c.flops() == 120);
  }
  {
    FlopCounter outer;
    bmm(ones({2, 3, 4}), ones({2, 4, 6}));
    FlopCounter inner;
    matmul(ones({7, 3, 4}), ones({4, 2}));  // matmul folds the batch into one mm
    CHECK(inner.flops() == 2.0 * 21 * 4 * 2);
    CHECK(outer.flops() == 2.0 * 2 * 3 * 4 * 6 + inner.flops());
  }
  {
    FlopCounter c;
    conv2d(ones({2, 3, 8, 8}), ones({4, 3, 3, 3}), Tensor(), {1, 1}, {1, 1});
    CHECK(c.flops() == 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3));
  }
  mm(a, b);  // no counter alive: nothing to count, nothing fails
}

TEST_CASE("FlopCounter: a linear layer's training step is forward + both gradients", "[flops]") {
  Tensor x = ones({16, 32});
  Tensor w = ones({8, 32}).requires_grad_(true);
  Tensor x2 = ones({16, 32}).requires_grad_(true);
  FlopCounter c;
  linear(x, w, Tensor()).sum().backward();  // input needs no gradient: forward + weight gradient
  CHECK(c.flops() == 2 * (2.0 * 16 * 32 * 8));
  const double before = c.flops();
  linear(x2, w, Tensor()).sum().backward();
  CHECK(c.flops() - before == 3 * (2.0 * 16 * 32 * 8));
}

}  // namespace test_flop_counter
