#include "data/csv_dataset.h"
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include "core/error.h"
#include "core/rng.h"
#include "data/dataset_registry.h"
#include "data/dataset_storage.h"

namespace tr::data {

namespace {

bool is_integer(const std::string& s) {
  int64_t v;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

void fit_schema(CsvSchema& s, const CsvTable& t, const std::vector<size_t>& rows) {
  TR_CHECK(!rows.empty(), "CSV ", t.path, ": the training split has no rows");
  const size_t F = s.features.size();
  s.mean.assign(F, 0.0);
  s.std.assign(F, 1.0);
  for (size_t f = 0; f < F; ++f) {
    const size_t c = t.column(s.features[f], "[data] features");
    std::vector<double> v;
    v.reserve(rows.size());
    for (size_t r : rows) v.push_back(csv_number(t, r, c));
    double sum = 0;
    for (double x : v) sum += x;
    const double mean = sum / double(v.size());
    double sq = 0;
    for (double x : v) sq += (x - mean) * (x - mean);
    const double sd = std::sqrt(sq / double(v.size()));
    if (s.standardize) {
      s.mean[f] = mean;
      s.std[f] = sd > 0 ? sd : 1.0;  // a constant column becomes 0, as StandardScaler leaves it
    }
  }
  if (!s.classification) return;
  const size_t tc = t.column(s.target, "[data] target");
  std::vector<std::string> labels;
  bool all_int = true;
  for (size_t r : rows) {
    labels.push_back(t.rows[r][tc]);
    all_int = all_int && is_integer(labels.back());
  }
  std::sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    return all_int ? std::stoll(a) < std::stoll(b) : a < b;
  });
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  s.classes = labels;
}

CsvDataset::CsvDataset(const CsvTable& t, const std::vector<size_t>& rows, const CsvSchema& s, std::string split) {
  const int64_t N = int64_t(rows.size()), F = int64_t(s.features.size());
  std::vector<size_t> cols;
  for (const auto& f : s.features) cols.push_back(t.column(f, "[data] features"));
  const size_t tc = t.column(s.target, "[data] target");
  x_ = dataset_storage({N, F}, DType::F32);
  float* px = x_.data_ptr<float>();
  std::map<std::string, int64_t> class_of;
  for (size_t k = 0; k < s.classes.size(); ++k) class_of[s.classes[k]] = int64_t(k);
  y_ = s.classification ? dataset_storage({N}, DType::I64) : dataset_storage({N, 1}, DType::F32);
  for (int64_t i = 0; i < N; ++i) {
    const size_t r = rows[size_t(i)];
    for (int64_t f = 0; f < F; ++f)
      px[i * F + f] = float((csv_number(t, r, cols[size_t(f)]) - s.mean[size_t(f)]) / s.std[size_t(f)]);
    if (s.classification) {
      auto it = class_of.find(t.rows[r][tc]);
      TR_CHECK(it != class_of.end(), "CSV ", t.where(r), ", column '", s.target, "': label '", t.rows[r][tc],
               "' is not among the training split's classes (", s.classes, ")");
      y_.data_ptr<int64_t>()[i] = it->second;
    } else {
      y_.data_ptr<float>()[i] = float(csv_number(t, r, tc));
    }
  }
  describe_ = str("CsvDataset(", split, ": ", N, " rows of ", t.path, ", ", F, " features",
                  s.standardize ? " standardised" : "", ", target '", s.target, "'",
                  s.classification ? str(": ", s.classes.size(), " classes") : std::string(": a value"), ")");
}

Example CsvDataset::get(int64_t i) const {
  check_index(i);
  return {x_.select(0, i).clone(), y_.select(0, i).clone()};
}

Example CsvDataset::get_batch(const std::vector<int64_t>& idx) const {
  for (int64_t i : idx) check_index(i);
  Tensor ix =
      from_vector(std::vector<double>(idx.begin(), idx.end()), {int64_t(idx.size())}, TensorOptions(DType::I64));
  return {index_select(x_, 0, ix), index_select(y_, 0, ix)};
}

namespace {

DatasetSplits build_csv(const TomlTable& t, const DatasetContext& ctx) {
  auto resolve = [&](const std::string& p) { return resolve_path(p, ctx.config_dir); };
  const CsvTable train = read_csv(resolve(t.get_string("train")));
  CsvSchema s;
  s.target = t.get_string("target");
  train.column(s.target, "[data] target");
  s.classification = t.get_choice("task", {"classification", "regression"}, "classification") == "classification";
  s.standardize = t.get_bool("standardize", true);
  if (t.has("features")) {
    s.features = t.get_strings("features");
  } else {
    for (const auto& c : train.header)
      if (c != s.target) s.features.push_back(c);
  }
  TR_CHECK(!s.features.empty(), "CSV ", train.path, ": no feature columns besides the target '", s.target, "'");
  if (ctx.input_shape != Shape{int64_t(s.features.size())})
    t.fail("features", str("gives ", s.features.size(), " inputs, but the model expects per-sample input ",
                           ctx.input_shape, " (set the model's input to [", s.features.size(), "])"));
  std::vector<size_t> train_rows, eval_rows;
  std::optional<CsvTable> eval_table;
  if (t.has("eval")) {
    eval_table = read_csv(resolve(t.get_string("eval")));
    for (size_t i = 0; i < train.rows.size(); ++i) train_rows.push_back(i);
    for (size_t i = 0; i < eval_table->rows.size(); ++i) eval_rows.push_back(i);
  } else {
    // a seeded permutation, the tail its eval rows (sklearn's train_test_split with shuffle)
    const double frac = t.get_float("eval_fraction", 0.2);
    if (!(frac > 0 && frac < 1)) t.fail("eval_fraction", "must be in (0, 1) (or give eval = \"file.csv\")");
    Generator gen(uint64_t(t.get_int("split_seed", int64_t(ctx.seed))));
    const std::vector<double> perm = randperm(int64_t(train.rows.size()), &gen).tolist();
    const size_t n_eval = size_t(double(train.rows.size()) * frac);
    for (size_t i = 0; i < perm.size(); ++i)
      (i + n_eval < perm.size() ? train_rows : eval_rows).push_back(size_t(perm[i]));
    std::sort(train_rows.begin(), train_rows.end());
    std::sort(eval_rows.begin(), eval_rows.end());
  }
  fit_schema(s, train, train_rows);
  DatasetSplits d;
  d.train = std::make_shared<CsvDataset>(train, train_rows, s, "train");
  d.eval = std::make_shared<CsvDataset>(eval_table ? *eval_table : train, eval_rows, s, "eval");
  nlohmann::json st;
  st["features"] = s.features;
  st["mean"] = s.mean;
  st["std"] = s.std;
  st["classes"] = s.classes;
  d.state = st.dump();
  return d;
}

}  // namespace

TR_REGISTER_DATASET("csv", {build_csv,
                            "train, eval (or eval_fraction = 0.2, split_seed), target, features "
                            "(default: every other column), task = classification | regression, "
                            "standardize = true"});

}  // namespace tr::data
