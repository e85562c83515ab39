// CsvDataset (dataset = "csv"): a table's feature columns as f32 inputs [F], standardised with the
// training split's mean and standard deviation (sklearn's StandardScaler: the population std, a
// constant column left at 0), and its target column as a class index (i64; the classes are the
// training split's sorted labels, numerically where every label is an integer) or a value (f32
// [1], for an MSE regression). Held in memory as two tensors; get is a row's view.
#pragma once
#include <string>
#include <vector>
#include "data/csv_table.h"
#include "data/dataset.h"

namespace tr::data {

struct CsvSchema {
  std::vector<std::string> features;  // column names, in input order
  std::string target;
  bool classification = true;
  bool standardize = true;
  // fitted on the training split
  std::vector<double> mean, std;
  std::vector<std::string> classes;  // classification: index -> label
};

class CsvDataset : public Dataset {
 public:
  // The rows `rows` of `table` (in this order) under `schema` (its statistics already fitted).
  CsvDataset(const CsvTable& table, const std::vector<size_t>& rows, const CsvSchema& schema, std::string split);

  int64_t size() const override { return x_.size(0); }
  Example get(int64_t i) const override;
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override { return describe_; }

 private:
  Tensor x_, y_;
  std::string describe_;
};

// The schema's statistics (mean, std, classes) from `rows` of `table`.
void fit_schema(CsvSchema& schema, const CsvTable& table, const std::vector<size_t>& rows);

}  // namespace tr::data
