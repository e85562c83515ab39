// CSV tables (libcsv) and CsvDataset: a file written by Python's csv module (quotes, commas and
// newlines inside fields, CRLF, spaces around numbers) reads back exactly; standardisation from the
// training split; sorted classes; every damaged table is one error naming the file and the record.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include "core/error.h"
#include "data/csv_dataset.h"
#include "data/csv_table.h"
#include "data/dataset_registry.h"
#include "unit/temp_dir.h"

namespace test_csv_dataset {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;

namespace {
const std::string kFixture = std::string(TRAINER_FIXTURES_DIR) + "/tabular_fixture.csv";

std::string error_of(const std::string& csv) {
  try {
    parse_csv(csv.data(), csv.size(), "t.csv");
  } catch (const Error& e) { return e.what(); }
  return "no error";
}
}  // namespace

TEST_CASE("CSV: Python's csv module's quoting reads back exactly", "[data][csv]") {
  CsvTable t = read_csv(kFixture);
  CHECK(t.header == std::vector<std::string>{"id", "sepal length", "note", "ratio", "species"});
  REQUIRE(t.rows.size() == 6);
  CHECK(t.rows[1][2] == "says \"hi\", twice");
  CHECK(t.rows[2][2] == "two\nlines");
  CHECK(t.rows[3][2].empty());
  CHECK(t.rows[4][2] == "x,y");
  CHECK(t.row_line == std::vector<int64_t>{2, 3, 5, 6, 7, 8});  // record 3 spans lines 4 and 5
  CHECK(csv_number(t, 1, 3) == 2.5);
  CHECK(csv_number(t, 2, 3) == -325.0);
  CHECK(csv_number(t, 0, 3) == 1e-3);
}

TEST_CASE("CSV: damaged tables are one error naming the file and the record", "[data][csv]") {
  CHECK_THAT(error_of("a,b\n1,2\n3\n"), Contains("t.csv: record 2 (line 3) has 1 fields, the header 2"));
  CHECK_THAT(error_of("a,b\n1,\"2\n"), Contains("t.csv") && Contains("at the end of the file"));
  CHECK_THAT(error_of("a,b\n1,\"x\"y\n"), Contains("t.csv: line 2"));
  CHECK_THAT(error_of(""), Contains("empty file"));
  CHECK_THAT(error_of("a,a\n1,2\n"), Contains("names column 'a' twice"));
  CsvTable t = parse_csv("a,b\n1,x1\n", 9, "t.csv");
  CHECK_THROWS_WITH(csv_number(t, 0, 1), Contains("t.csv: record 1 (line 2), column 'b': 'x1' is not a finite number"));
  CHECK_THROWS_WITH(t.column("c", "[data] target"),
                    Contains("[data] target names column 'c'") && Contains("(columns: [a, b])"));
}

TEST_CASE("CsvDataset: standardised features, sorted classes, an eval file, regression", "[data][csv]") {
  const CsvTable t = read_csv(kFixture);
  CsvSchema s;
  s.features = {"sepal length", "ratio"};
  s.target = "species";
  std::vector<size_t> rows{0, 1, 2, 3, 4, 5};
  fit_schema(s, t, rows);
  CHECK(s.classes == std::vector<std::string>{"setosa", "versicolor", "virginica"});
  const double mean = (5.1 + 4.9 + 7.0 + 6.4 + 6.3 + 5.8) / 6;
  CHECK(s.mean[0] == Approx(mean));
  double sq = 0;
  for (double v : {5.1, 4.9, 7.0, 6.4, 6.3, 5.8}) sq += (v - mean) * (v - mean);
  CHECK(s.std[0] == Approx(std::sqrt(sq / 6)));  // the population std, as StandardScaler
  CsvDataset d(t, rows, s, "train");
  CHECK(d.size() == 6);
  Example e = d.get(2);
  CHECK(e.input.sizes() == Shape{2});
  CHECK(e.input.select(0, 0).item() == Approx((7.0 - mean) / std::sqrt(sq / 6)).epsilon(1e-6));
  CHECK(e.target.item() == 1);  // versicolor
  Example b = d.get_batch({5, 0});
  CHECK(b.target.tolist() == std::vector<double>{2, 0});
  // the eval file is scaled with the training split's statistics
  const CsvTable ev = read_csv(std::string(TRAINER_FIXTURES_DIR) + "/tabular_eval_fixture.csv");
  CsvDataset de(ev, {0, 1}, s, "eval");
  CHECK(de.get(0).input.select(0, 0).item() == Approx((5.0 - mean) / std::sqrt(sq / 6)).epsilon(1e-6));
  CHECK(de.get(1).target.item() == 0);
  // a label the training split never had
  CsvSchema few = s;
  fit_schema(few, t, {0, 1, 2, 3});
  CHECK_THROWS_WITH(
      CsvDataset(t, {4}, few, "eval"),
      Contains("record 5 (line 7), column 'species': label 'virginica' is not among the training split's classes"));
  // regression: the target as a value
  CsvSchema r;
  r.features = {"sepal length"};
  r.target = "ratio";
  r.classification = false;
  fit_schema(r, t, rows);
  CsvDataset dr(t, rows, r, "train");
  CHECK(dr.get(4).target.sizes() == Shape{1});
  CHECK(dr.get(4).target.item() == 12.0);
}

TEST_CASE("dataset = csv: the builder's split, schema checks and state", "[data][csv]") {
  TempDir tmp;
  auto build = [&](const std::string& keys, Shape input) {
    toml::table tt = toml::parse("train = '" + kFixture + "'\n" + keys);
    TomlTable t(tt, "cfg.toml", "[data]");
    DatasetContext ctx;
    ctx.seed = 3;
    ctx.input_shape = input;
    return Registry<DatasetType>::get().at("csv").build(t, ctx);
  };
  DatasetSplits s = build("target = 'species'\nfeatures = ['sepal length', 'ratio']\neval_fraction = 0.34\n", {2});
  CHECK(s.train->size() + s.eval->size() == 6);
  CHECK(s.eval->size() == 2);
  CHECK_THAT(s.state, Contains("\"classes\":[\"setosa\",\"versicolor\",\"virginica\"]") && Contains("\"mean\""));
  // the same seed, the same split
  CHECK(build("target = 'species'\nfeatures = ['sepal length', 'ratio']\neval_fraction = 0.34\n", {2}).state ==
        s.state);
  CHECK_THROWS_WITH(build("target = 'kind'\n", {2}), Contains("[data] target names column 'kind'"));
  CHECK_THROWS_WITH(build("target = 'species'\nfeatures = ['sepal length', 'petal']\n", {2}),
                    Contains("[data] features names column 'petal'"));
  CHECK_THROWS_WITH(build("target = 'species'\nfeatures = ['sepal length', 'note']\n", {2}),
                    Contains("column 'note': 'plain' is not a finite number"));
  CHECK_THROWS_WITH(build("target = 'species'\nfeatures = ['sepal length']\n", {2}),
                    Contains("gives 1 inputs, but the model expects per-sample input [2]"));
}

}  // namespace test_csv_dataset
