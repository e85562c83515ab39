// Metrics sinks: metrics.jsonl written a line at a time, counted on every rank, and cut back to a
// checkpoint's line count when a run resumes.
#include <catch2/catch.hpp>
#include "io/metrics_sink.h"
#include "unit/temp_dir.h"

namespace test_metrics_sink {

using namespace tr;

TEST_CASE("JsonlMetricsSink: one record a line, a resume keeps the checkpoint's lines and appends", "[metrics]") {
  TempDir tmp;
  const std::string path = tmp / "metrics.jsonl";
  {
    io::JsonlMetricsSink s(path, true);
    for (int i = 0; i < 4; ++i) s.write("{\"step\":" + std::to_string(i) + "}");
    CHECK(s.records() == 4);
    CHECK(read_file(path) == "{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");  // flushed as written
  }
  {
    io::JsonlMetricsSink s(path, true, 2);  // the checkpoint saw 2 lines; the run writes the rest again
    CHECK(s.records() == 2);
    CHECK(read_file(path) == "{\"step\":0}\n{\"step\":1}\n");
    s.write("{\"step\":2}");
    CHECK(s.records() == 3);
  }
  CHECK(read_file(path) == "{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n");
  {
    io::JsonlMetricsSink fresh(path, true);  // a new run starts the file over
    CHECK(fresh.records() == 0);
  }
  CHECK(read_file(path).empty());
  // ranks other than 0 count without a file, so that their checkpoints agree with rank 0's
  io::JsonlMetricsSink counting(tmp / "none.jsonl", false, 5);
  counting.write("{}");
  CHECK(counting.records() == 6);
  CHECK(!std::filesystem::exists(tmp / "none.jsonl"));
  // metrics through the interface
  io::JsonlMetricsSink s(path, true);
  io::MetricsSink& sink = s;
  sink.write("{\"a\":1}");
  CHECK(sink.records() == 1);
}

}  // namespace test_metrics_sink
