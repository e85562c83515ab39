// MetricsRecord: a train or eval line of metrics.jsonl, fields in the order they are added and
// numbers in the forms the file has always had, which readers of older runs compare.
#include <catch2/catch.hpp>
#include <cmath>
#include "io/metrics_sink.h"
#include "train/metrics_record.h"

namespace test_metrics_record {

using namespace tr;

TEST_CASE("MetricsRecord: fields in order, numbers as metrics.jsonl writes them", "[train][metrics]") {
  train::MetricsRecord r;
  r.add("split", "train").add("step", int64_t(30)).add("epoch", 0).add("loss", 0.912098676);
  r.add("lr", std::vector<double>{0.1, 1e-5}).add("flops_per_step", 6.82870916e+10).add("samples_per_s", 2620.3);
  r.add("mem_peak_mb", 0.0).add_json("mem_peak_mb_per_rank", std::vector<double>{0.0, 13.4});
  CHECK(r.str() ==
        "{\"split\":\"train\",\"step\":30,\"epoch\":0,\"loss\":0.912098676,\"lr\":[0.1,1e-05],"
        "\"flops_per_step\":6.82870916e+10,\"samples_per_s\":2620.3,\"mem_peak_mb\":0,\"mem_peak_mb_per_rank\":[0.0,13."
        "4]}");
  CHECK(train::MetricsRecord().str() == "{}");
}

TEST_CASE("MetricsRecord: non-finite numbers as words that parse_metrics_record reads back", "[train][metrics]") {
  train::MetricsRecord r, tail;
  tail.add("b", -INFINITY);
  r.add("loss", NAN).add("lr", std::vector<double>{INFINITY}).append(tail).add("name", "a\"b");
  CHECK(r.str() == "{\"loss\":NaN,\"lr\":[Infinity],\"b\":-Infinity,\"name\":\"a\\\"b\"}");
  const nlohmann::json j = io::parse_metrics_record(r.str());
  CHECK(std::isnan(io::metrics_number(j["loss"])));
  CHECK(io::metrics_number(j["b"]) == -INFINITY);
}

}  // namespace test_metrics_record
