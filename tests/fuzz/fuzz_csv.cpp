// CSV tables: parsed by libcsv, every cell read as a number, then the last column as a target
// (classification and regression) over the others as features, fitted and turned into tensors.
#include "data/csv_dataset.h"
#include "data/csv_table.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tr::fuzz::expect_clean_error([&] {
    tr::data::CsvTable t = tr::data::parse_csv(reinterpret_cast<const char*>(data), size, "fuzz.csv");
    for (size_t r = 0; r < t.rows.size(); ++r)
      for (size_t c = 0; c < t.header.size(); ++c)
        tr::fuzz::expect_clean_error([&] { (void)tr::data::csv_number(t, r, c); });
    if (t.header.size() < 2 || t.rows.empty()) return;
    std::vector<size_t> rows(t.rows.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
    for (bool classification : {true, false}) {
      tr::fuzz::expect_clean_error([&] {
        tr::data::CsvSchema s;
        s.features.assign(t.header.begin(), t.header.end() - 1);
        s.target = t.header.back();
        s.classification = classification;
        tr::data::fit_schema(s, t, rows);
        tr::data::CsvDataset d(t, rows, s, "train");
        (void)d.get_batch({0, d.size() - 1});
      });
    }
  });
  return 0;
}
