// ProcessGroup tests [dist]: real Gloo groups of 2-3 forked processes that rendezvous through a
// file-backed Store in a temp dir (an in-process store cannot cross fork()). Checked: allreduce
// (sum, avg, max, min) on every dtype and on sizes 0 .. 8 MB, broadcast from each root, allgather,
// barrier, async ops completing in issue order, and the failure modes: a peer that exits, a peer
// that is stuck, ranks that disagree on the collective, a rank that never joins; each must be an
// Error naming the collective and the rank, within the timeout, never a hang. Also prints the
// 4 MiB allreduce latency of 2 processes. [gpu]: the NCCL group, skipped without a GPU.
#include <catch2/catch.hpp>
#include "unit/require_gpu.h"
#include "ops/factories.h"
#include "ops/ops.h"
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>
#include <type_traits>
#include "core/cuda_hooks.h"
#include "distributed/gloo_process_group.h"
#include "distributed/process_group.h"
#include "distributed/tcp_store.h"
#include "unit/fork_ranks.h"

namespace test_process_group {

using namespace tr;
using namespace tr::distributed;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
using namespace fork_ranks;

namespace {

// Small integers, so sums are exact in every dtype (u8 stays non-negative and below 256/3).
double value(int rank, int64_t i, DType dt) {
  const double v = double(i % 13) + 3.0 * rank;
  return dt == DType::U8 ? v : v - 9.0;
}

Tensor filled(int rank, int64_t n, DType dt) {
  Tensor t = empty({n}, TensorOptions(dt));
  TR_DISPATCH_NUMERIC(dt, "filled", [&] {
    auto* p = t.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(float(value(rank, i, dt)));
  });
  return t;
}

double element(const Tensor& t, int64_t i) {
  double v = 0;
  TR_DISPATCH_NUMERIC(t.dtype(), "element", [&] {
    const scalar_t x = t.data_ptr<scalar_t>()[i];
    if constexpr (std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>)
      v = double(float(x));
    else
      v = double(x);
  });
  return v;
}

double expected(ReduceOp op, int size, int64_t i, DType dt) {
  double s = 0, mx = -1e300, mn = 1e300;
  for (int r = 0; r < size; ++r) {
    const double v = value(r, i, dt);
    s += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (op) {
    case ReduceOp::SUM: return s;
    case ReduceOp::AVG: return s / size;
    case ReduceOp::MAX: return mx;
    case ReduceOp::MIN: return mn;
  }
  return 0;
}

void check_allreduce(ProcessGroup& pg, DType dt, ReduceOp op, int64_t n) {
  Tensor t = filled(pg.rank(), n, dt);
  pg.allreduce(t, op);
  const double tol = dt == DType::BF16 ? 0.07 : dt == DType::F16 ? 0.01 : 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    const double want = expected(op, pg.size(), i, dt);
    const double got = element(t, i);
    EXPECT(std::abs(got - want) <= tol * std::max(1.0, std::abs(want)), dtype_name(dt), " ", reduce_op_name(op),
           " n=", n, " element ", i, ": got ", got, ", want ", want);
  }
}

}  // namespace

// Runs body once with allreduces through shared memory (ranks of one machine, the default) and once
// over Gloo's TCP (TR_DIST_SHM=0, read by the forked ranks).
template <typename F> void for_each_transport(const F& body) {
  for (bool shm : {true, false}) {
    INFO((shm ? "allreduce through shared memory" : "allreduce over gloo's tcp (TR_DIST_SHM=0)"));
    ::setenv("TR_DIST_SHM", shm ? "1" : "0", 1);
    body(shm);
  }
  ::unsetenv("TR_DIST_SHM");
}

TEST_CASE("gloo allreduce: sum, avg, max, min on every dtype and size", "[dist]") {
  for_each_transport([](bool shm) {
    for (int world : {2, 3}) {
      INFO("world size " << world);
      auto res = run_ranks(world, [world, shm](int rank, Store& store, std::ostream&) {
        auto pg = gloo_group(store, rank, world);
        EXPECT(pg->rank() == rank && pg->size() == world && pg->backend() == "gloo", "identity");
        EXPECT(dynamic_cast<GlooProcessGroup&>(*pg).shared_memory() == shm, "transport: ", pg->describe());
        for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::U8, DType::F16, DType::BF16})
          for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN}) {
            if (op == ReduceOp::AVG && !is_floating(dt)) continue;
            for (int64_t n : {0, 1, 7, 1000, 70001}) check_allreduce(*pg, dt, op, n);
          }
        // ~8 MB: many Gloo segments.
        check_allreduce(*pg, DType::F32, ReduceOp::SUM, 2 * 1024 * 1024 + 3);
        check_allreduce(*pg, DType::F64, ReduceOp::AVG, 1024 * 1024);
        check_allreduce(*pg, DType::I64, ReduceOp::MAX, 1024 * 1024);
        // 2-d and 0-dim tensors reduce in place as well.
        Tensor m = full({3, 4}, double(rank + 1));
        pg->allreduce(m, ReduceOp::SUM);
        EXPECT(m.sizes() == Shape({3, 4}) && element(m, 11) == world * (world + 1) / 2, "2-d sum");
        Tensor s = scalar_tensor(double(rank), DType::F64);
        pg->allreduce(s, ReduceOp::MAX);
        EXPECT(s.item() == world - 1, "0-dim max ", s.item());
        // rounding sums (more than one shared-memory chunk): every rank gets the same bits
        Tensor r = randn({3 * 1024 * 1024 + 5}) * double(rank + 1);
        pg->allreduce(r, ReduceOp::AVG);
        std::vector<Tensor> all = pg->allgather(r);
        for (int k = 0; k < world; ++k)
          EXPECT(equal(all[size_t(k)], r), "rank ", k, "'s average differs from rank ", rank, "'s");
      });
      require_all_ok(res);
    }
  });
}

TEST_CASE("gloo broadcast from each root, allgather, barrier", "[dist]") {
  const int world = 3;
  auto res = run_ranks(world, [](int rank, Store& store, std::ostream&) {
    auto pg = gloo_group(store, rank, world);
    for (int root = 0; root < world; ++root)
      for (DType dt : {DType::F32, DType::F64, DType::I64, DType::BF16, DType::U8})
        for (int64_t n : {0, 5, 300000}) {
          Tensor t = filled(rank, n, dt);
          pg->broadcast(t, root);
          for (int64_t i = 0; i < n; i += 997)
            EXPECT(element(t, i) == value(root, i, dt), "broadcast from ", root, " ", dtype_name(dt), " n=", n,
                   " element ", i);
        }
    // allgather: out[r] is rank r's tensor, with its shape.
    Tensor mine = full({2, 3}, double(10 * rank), DType::I64);
    std::vector<Tensor> all = pg->allgather(mine);
    EXPECT(int(all.size()) == world, "allgather count");
    for (int r = 0; r < world; ++r) {
      EXPECT(all[size_t(r)].sizes() == Shape({2, 3}), "allgather shape");
      EXPECT(element(all[size_t(r)].contiguous().view({6}), 5) == 10 * r, "allgather value of rank ", r);
    }
    Tensor empty_t = empty({0}, TensorOptions(DType::F32));
    EXPECT(pg->allgather(empty_t).size() == size_t(world), "allgather of nothing");
    // barrier: nobody leaves before the last rank arrives.
    if (rank == 0) std::this_thread::sleep_for(ms(300));
    const auto t0 = Clock::now();
    pg->barrier();
    const auto waited = std::chrono::duration_cast<ms>(Clock::now() - t0).count();
    if (rank != 0) EXPECT(waited >= 200, "barrier returned after ", waited, " ms, before rank 0 arrived");
    // Argument errors are raised at once, on the calling thread.
    Tensor strided = zeros({4, 4}).t();
    bool threw = false;
    try {
      pg->allreduce(strided);
    } catch (const Error& e) { threw = std::string(e.what()).find("not contiguous") != std::string::npos; }
    EXPECT(threw, "a non-contiguous tensor must be refused");
    Tensor ints = zeros({3}, DType::I64);
    threw = false;
    try {
      pg->allreduce(ints, ReduceOp::AVG);
    } catch (const Error&) { threw = true; }
    EXPECT(threw, "avg of integers must be refused");
    pg->barrier();
  });
  require_all_ok(res);
}

TEST_CASE("gloo reduce_scatter and allgather_into: windows, in place, the bits of allreduce", "[dist][zero]") {
  for_each_transport([](bool) {
    for (int world : {2, 3}) {
      INFO("world size " << world);
      auto res = run_ranks(world, [world](int rank, Store& store, std::ostream&) {
        auto pg = gloo_group(store, rank, world);
        for (DType dt : {DType::F32, DType::F64, DType::I64})
          for (int64_t m : {0, 1, 5, 300001}) {  // elements per rank (300001 x 3 f64: several shm chunks)
            Tensor in = filled(rank, m * world, dt);
            Tensor out = empty({m}, TensorOptions(dt));
            pg->reduce_scatter(out, in, ReduceOp::SUM);
            for (int64_t i = 0; i < m; i += 1 + m / 50)
              EXPECT(element(out, i) == expected(ReduceOp::SUM, world, rank * m + i, dt), dtype_name(dt), " m=", m,
                     " element ", i);
            // in place: the output is this rank's window of the input
            Tensor io = filled(rank, m * world, dt);
            Tensor window = io.narrow(0, rank * m, m);
            pg->reduce_scatter(window, io, ReduceOp::MAX);
            for (int64_t i = 0; i < m; i += 1 + m / 50)
              EXPECT(element(window, i) == expected(ReduceOp::MAX, world, rank * m + i, dt), "in place, element ", i);
            // allgather_into, out of place and in place
            Tensor mine = filled(rank, m, dt);
            Tensor all = empty({m * world}, TensorOptions(dt));
            pg->allgather_into(all, mine);
            Tensor all2 = empty({m * world}, TensorOptions(dt));
            Tensor w2 = all2.narrow(0, rank * m, m);
            w2.copy_(mine);
            pg->allgather_into(all2, w2);
            for (int r = 0; r < world; ++r)
              for (int64_t i = 0; i < m; i += 1 + m / 50) {
                EXPECT(element(all, r * m + i) == value(r, i, dt), "allgather_into: rank ", r, " element ", i);
                EXPECT(element(all2, r * m + i) == value(r, i, dt), "allgather_into in place: rank ", r, " element ",
                       i);
              }
          }
        // rounding f32 sums: reduce_scatter's window holds allreduce's bits
        Tensor x = randn({world * 700001}) * double(rank + 1);
        Tensor y = x.clone();
        Tensor piece = empty({700001});
        pg->reduce_scatter(piece, x, ReduceOp::SUM);
        pg->allreduce(y, ReduceOp::SUM);
        EXPECT(equal(piece, y.narrow(0, rank * 700001, 700001)), "reduce_scatter differs from allreduce's window");
        // wrong sizes are refused at once
        bool threw = false;
        try {
          Tensor bad = empty({3});
          Tensor src = empty({3 * world + 1});
          pg->reduce_scatter(bad, src, ReduceOp::SUM);
        } catch (const Error& e) { threw = std::string(e.what()).find("per rank") != std::string::npos; }
        EXPECT(threw, "a reduce_scatter of mismatched sizes must be refused");
      });
      require_all_ok(res);
    }
  });
}

TEST_CASE("gloo async collectives complete in issue order", "[dist]") {
  auto res = run_ranks(2, [](int rank, Store& store, std::ostream&) {
    auto pg = gloo_group(store, rank, 2);
    std::vector<Tensor> ts;
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < 8; ++k) {
      ts.push_back(full({int64_t(1000) << k}, double(k + rank)));
      works.push_back(pg->allreduce_async(ts.back(), ReduceOp::SUM));
    }
    Tensor b = full({100}, double(rank));
    works.push_back(pg->broadcast_async(b, 1));
    // Coalesced: three tensors, one collective.
    std::vector<Tensor> bucket = {full({3}, 1.0 + rank), full({2, 2}, 10.0 * (rank + 1)), full({5}, -1.0)};
    works.push_back(pg->allreduce_coalesced_async(bucket, ReduceOp::AVG));
    // Waiting on the last one first: everything issued before it is done too.
    works.back()->wait();
    for (auto& w : works) EXPECT(w->is_completed(), "an earlier op is not completed");
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    for (int k = 0; k < 8; ++k) EXPECT(element(ts[size_t(k)], (int64_t(1000) << k) - 1) == 2 * k + 1, "op ", k);
    EXPECT(element(b, 99) == 1.0, "broadcast after the allreduces");
    EXPECT(element(bucket[0], 2) == 1.5 && element(bucket[1].view({4}), 3) == 15.0 && element(bucket[2], 4) == -1.0,
           "coalesced avg");
  });
  require_all_ok(res);
}

TEST_CASE("gloo: a peer that exits makes the survivor's collective fail, naming it", "[dist]") {
  for_each_transport([](bool) {
    for (int world : {2, 3}) {
      INFO("world size " << world);
      const int dead = world - 1;
      auto res = run_ranks(world, [dead](int rank, Store& store, std::ostream& report) {
        auto pg = gloo_group(store, rank, dead + 1, ms(2000));
        pg->barrier();  // connected and working
        if (rank == dead) ::_exit(0);
        std::this_thread::sleep_for(ms(100));
        Tensor t = zeros({300000});  // 1.1 MiB
        const auto t0 = Clock::now();
        try {
          pg->allreduce(t);
          report << "NO ERROR\n";
        } catch (const Error& e) {
          report << "elapsed_ms " << std::chrono::duration_cast<ms>(Clock::now() - t0).count() << "\n"
                 << e.what() << "\n";
        }
        // The group is broken now: the next collective fails at once with the first error.
        try {
          pg->barrier();
          report << "BARRIER OK\n";
        } catch (const Error& e) { report << "next: " << e.what() << "\n"; }
      });
      for (int r = 0; r < dead; ++r) {
        INFO("rank " << r << " report:\n" << res[size_t(r)].out);
        REQUIRE(res[size_t(r)].status == 0);
        const std::string& out = res[size_t(r)].out;
        CHECK_THAT(out, Contains("allreduce (sum) of 1.1 MiB float32 (tag 2)"));
        CHECK_THAT(out, Contains(str("rank ", dead)));
        CHECK_THAT(out, Contains("next: gloo barrier (tag 3) was not run: an earlier collective failed"));
        const long elapsed = std::stol(out.substr(out.find("elapsed_ms ") + 11));
        CHECK(elapsed < 2000 + 2000);  // the timeout, plus the arrival log's short wait
        WARN("world " << world << ", rank " << r << ": " << out.substr(0, out.find('\n')) << "; "
                      << out.substr(out.find('\n') + 1, out.find('\n', out.find('\n') + 1) - out.find('\n') - 1));
      }
    }
  });
}

TEST_CASE("gloo: a stuck peer or mismatched collectives time out with a clear error", "[dist]") {
  SECTION("stuck peer") {
    auto res = run_ranks(2, [](int rank, Store& store, std::ostream& report) {
      auto pg = gloo_group(store, rank, 2, ms(1500));
      pg->barrier();
      if (rank == 1) {  // busy elsewhere for longer than the timeout, then gone
        std::this_thread::sleep_for(ms(4000));
        return;
      }
      Tensor t = zeros({1000});
      const auto t0 = Clock::now();
      try {
        pg->allreduce(t);
        report << "NO ERROR\n";
      } catch (const Error& e) {
        report << "elapsed_ms " << std::chrono::duration_cast<ms>(Clock::now() - t0).count() << "\n" << e.what();
      }
    });
    const std::string& out = res[0].out;
    INFO(out);
    CHECK_THAT(out, Contains("gloo allreduce (sum) of 3.9 KiB float32 (tag 2) timed out on rank 0 of 2"));
    CHECK_THAT(out, Contains("rank 1 did not arrive"));
    const long elapsed = std::stol(out.substr(out.find("elapsed_ms ") + 11));
    CHECK(elapsed >= 1400);
    CHECK(elapsed < 1500 + 1500);
  }
  SECTION("ranks issue different collectives") {
    for_each_transport([](bool shm) {
      auto res = run_ranks(2, [](int rank, Store& store, std::ostream& report) {
        auto pg = gloo_group(store, rank, 2, ms(1000));
        Tensor t = zeros({10});
        try {
          if (rank == 0)
            pg->allreduce(t);
          else
            pg->broadcast(t, 0);
          report << "NO ERROR\n";
        } catch (const Error& e) { report << e.what(); }
        // Stay connected until the peer has timed out too (else it sees this rank close the connection).
        std::this_thread::sleep_for(ms(3000));
      });
      int diagnosed = 0;
      for (int r = 0; r < 2; ++r) {
        const std::string& out = res[size_t(r)].out;
        INFO(out);
        if (shm) {
          // both ranks see at once what the other issued
          CHECK_THAT(out, Contains("the ranks issued different collectives: rank ") &&
                              Contains("an allreduce (sum) of 40 bytes in 4-byte elements") &&
                              Contains("a broadcast of 40 bytes from rank 0"));
          ++diagnosed;
          continue;
        }
        // Each rank times out with the diagnosis; on a loaded machine one rank may only see the
        // other close its connection after that one gave up (also a clear error, never a hang).
        bool timed_out = out.find("timed out") != std::string::npos;
        CHECK((timed_out || out.find("closed the connection") != std::string::npos));
        if (timed_out) {
          CHECK_THAT(out, Contains("every rank reached a collective with this tag"));
          ++diagnosed;
        }
      }
      CHECK(diagnosed >= 1);
    });
  }
  SECTION("ranks reduce different sizes (shared memory)") {
    auto res = run_ranks(2, [](int rank, Store& store, std::ostream& report) {
      auto pg = gloo_group(store, rank, 2, ms(1000));
      Tensor t = zeros({rank == 0 ? 10 : 12});
      try {
        pg->allreduce(t);
        report << "NO ERROR\n";
      } catch (const Error& e) { report << e.what(); }
    });
    for (int r = 0; r < 2; ++r) {
      INFO(res[size_t(r)].out);
      CHECK_THAT(res[size_t(r)].out, Contains("of 40 bytes") && Contains("of 48 bytes"));
    }
  }
}

TEST_CASE("gloo: a rank that never joins is named by the rendezvous timeout", "[dist]") {
  // World size 3, but rank 2 is never started.
  auto res = run_ranks(
      3,
      [](int rank, Store& store, std::ostream& report) {
        const auto t0 = Clock::now();
        try {
          auto pg = gloo_group(store, rank, 3, ms(1500));
          report << "NO ERROR\n";
        } catch (const Error& e) {
          report << "elapsed_ms " << std::chrono::duration_cast<ms>(Clock::now() - t0).count() << "\n" << e.what();
        }
      },
      ms(30000), /*started=*/2);
  for (int r = 0; r < 2; ++r) {
    const std::string& out = res[size_t(r)].out;
    INFO(out);
    CHECK_THAT(out, Contains(str("gloo rendezvous (store prefix 'pg', rank ", r, " of 3): timed out")));
    CHECK_THAT(out, Contains("rank 2 never joined"));
    const long elapsed = std::stol(out.substr(out.find("elapsed_ms ") + 11));
    CHECK(elapsed >= 1400);
    CHECK(elapsed < 1500 + 1000);
  }
}

TEST_CASE("gloo over the TCP store: collectives, and a stuck peer named through it", "[dist]") {
  // The launcher's store: the server in this process, a client per rank. The group's monitor
  // thread writes arrival records through the same client the rank uses.
  TCPStoreServer server("127.0.0.1", 0, "token-pg");
  const int port = server.port();
  auto res = run_ranks(
      3,
      [](int rank, Store& store, std::ostream& report) {
        auto pg = gloo_group(store, rank, 3, ms(1500), "tcp");
        check_allreduce(*pg, DType::F32, ReduceOp::SUM, 100000);
        Tensor b = filled(rank, 1000, DType::I64);
        pg->broadcast(b, 2);
        EXPECT(element(b, 999) == value(2, 999, DType::I64), "broadcast over the TCP store");
        if (rank == 1) {
          std::this_thread::sleep_for(ms(3500));  // stuck past the timeout
          return;
        }
        try {
          pg->barrier();
          report << "NO ERROR\n";
        } catch (const Error& e) { report << e.what(); }
        std::this_thread::sleep_for(ms(500));
      },
      ms(30000), -1, [port](const fs::path&) { return std::make_unique<TCPStore>("127.0.0.1", port, "token-pg"); });
  for (int r : {0, 2}) {
    INFO("rank " << r << ": " << res[size_t(r)].out);
    CHECK(res[size_t(r)].status == 0);
    CHECK_THAT(res[size_t(r)].out, Contains("gloo barrier (tag 3) timed out"));
    CHECK_THAT(res[size_t(r)].out, Contains("rank 1 did not arrive"));
  }
  CHECK(res[1].status == 0);
}

TEST_CASE("process group factory: world of one, unknown and unavailable backends", "[dist]") {
  TempDir dir;
  FileStore store(dir.path);
  auto pg = make_process_group("gloo", store, 0, 1, ms(1000), "solo");
  Tensor t = full({4}, 3.0);
  pg->allreduce(t, ReduceOp::AVG);
  pg->broadcast(t, 0);
  pg->barrier();
  CHECK(t.tolist() == std::vector<double>{3, 3, 3, 3});
  auto all = pg->allgather(t);
  REQUIRE(all.size() == 1);
  CHECK(all[0].tolist() == t.tolist());
  CHECK_THROWS_WITH(make_process_group("mpi", store, 0, 1, ms(1000), "x"),
                    Contains("unknown process group backend 'mpi'") && Contains("known: gloo, nccl"));
  CHECK_THROWS_WITH(make_process_group("gloo", store, 2, 2, ms(1000), "x"), Contains("rank 2 is outside [0, 2)"));
  if (!cuda::is_compiled()) {
    CHECK_THROWS_WITH(make_process_group("nccl", store, 0, 1, ms(1000), "x"), Contains("built with CUDA"));
  } else if (cuda::device_count() == 0) {
    CHECK_THROWS_WITH(make_process_group("nccl", store, 0, 1, ms(1000), "x"), Contains("no usable GPU"));
  }
  if (cuda::device_count() == 0) {  // "auto" takes Gloo without a GPU
    CHECK(make_process_group("auto", store, 0, 1, ms(1000), "auto")->backend() == "gloo");
  }
}

TEST_CASE("gloo allreduce latency, 4 MiB, 2 processes", "[dist]") {
  auto res = run_ranks(2, [](int rank, Store& store, std::ostream& report) {
    auto pg = gloo_group(store, rank, 2);
    Tensor t = ones({1024 * 1024});  // 4 MiB of f32
    for (int i = 0; i < 3; ++i) pg->allreduce(t);
    std::vector<double> times;
    for (int i = 0; i < 20; ++i) {
      pg->barrier();
      const auto t0 = Clock::now();
      pg->allreduce(t);
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    double avg = 0;
    for (double x : times) avg += x / double(times.size());
    report << "4 MiB f32 allreduce, 2 processes: best " << times[0] << " ms, median " << times[times.size() / 2]
           << " ms, avg " << avg << " ms";
  });
  require_all_ok(res);
  WARN(res[0].out << "  (notes: best 3.1-4.7 ms, avg 5-8.5 ms)");
}

// ---- NCCL: needs a GPU (ranks are threads, one GPU each; a world of one on a single GPU) ----

TEST_CASE("nccl process group on CUDA tensors", "[dist][gpu]") {
  TR_REQUIRE_GPU();
  const int world = std::min(cuda::device_count(), 2);
  TempDir dir;
  FileStore store(dir.path);
  store.set_timeout(ms(60000));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        ProcessGroupOptions o;
        o.backend = "nccl";
        o.rank = r;
        o.size = world;
        o.timeout = ms(60000);
        o.prefix = "nccl";
        o.cuda_device = r;
        auto pg = make_process_group(store, o);
        const Device dev(DeviceType::CUDA, r);
        Tensor t = full({1000}, double(r + 1)).to(dev);
        pg->allreduce(t, ReduceOp::SUM);
        EXPECT(t.cpu().tolist()[999] == world * (world + 1) / 2, "nccl sum");
        pg->allreduce(t, ReduceOp::AVG);
        EXPECT(t.cpu().tolist()[0] == world * (world + 1) / 2, "nccl avg");
        Tensor b = full({7}, double(r), DType::F64).to(dev);
        pg->broadcast(b, world - 1);
        EXPECT(b.cpu().tolist()[6] == world - 1, "nccl broadcast");
        auto all = pg->allgather(full({2}, double(r), DType::I64).to(dev));
        for (int q = 0; q < world; ++q) EXPECT(all[size_t(q)].cpu().tolist()[1] == q, "nccl allgather");
        std::vector<Tensor> bucket = {full({3}, 1.0).to(dev), full({5}, 2.0).to(dev)};
        pg->allreduce_coalesced(bucket, ReduceOp::MAX);
        EXPECT(bucket[1].cpu().tolist()[4] == 2.0, "nccl coalesced");
        pg->barrier();
      } catch (const std::exception& e) { errors[size_t(r)] = e.what(); }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << ": " << errors[size_t(r)]);
    CHECK(errors[size_t(r)].empty());
  }
}

}  // namespace test_process_group
