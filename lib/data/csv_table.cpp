#include "data/csv_table.h"
#include <csv.h>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include "core/error.h"

namespace tr::data {

namespace {

// libcsv's callbacks fill this: cells of the current record, complete records with their line
struct Sink {
  std::vector<std::string> record;
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> lines;
  int64_t line = 1;  // the line being fed
};

void on_field(void* s, size_t len, void* data) {
  auto* k = static_cast<Sink*>(data);
  k->record.emplace_back(s ? static_cast<const char*>(s) : "", s ? len : 0);
}

void on_record(int, void* data) {
  auto* k = static_cast<Sink*>(data);
  k->records.push_back(std::move(k->record));
  k->record.clear();
  k->lines.push_back(k->line);
}

}  // namespace

CsvTable parse_csv(const char* data, size_t size, const std::string& path) {
  csv_parser p;
  TR_CHECK(csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) == 0, "CSV ", path, ": cannot start libcsv");
  Sink sink;
  // fed line by line, so that a record's callback knows the line it ends on (a quoted field's
  // newline only moves the line on)
  size_t at = 0;
  while (at < size) {
    const char* nl = static_cast<const char*>(std::memchr(data + at, '\n', size - at));
    const size_t end = nl ? size_t(nl - data) + 1 : size;
    if (csv_parse(&p, data + at, end - at, on_field, on_record, &sink) != end - at) {
      const std::string why = csv_strerror(csv_error(&p));
      csv_free(&p);
      throw Error(str("CSV ", path, ": line ", sink.line, ": ", why,
                      " (fields in quotes must close their quotes; a quote", " inside one is written twice)"));
    }
    at = end;
    ++sink.line;
  }
  --sink.line;  // the last line fed
  if (csv_fini(&p, on_field, on_record, &sink) != 0) {
    const std::string why = csv_strerror(csv_error(&p));
    csv_free(&p);
    throw Error(str("CSV ", path, ": at the end of the file: ", why));
  }
  csv_free(&p);
  TR_CHECK(!sink.records.empty(), "CSV ", path, ": empty file; expected a header row of column names");
  CsvTable t;
  t.path = path;
  t.header = std::move(sink.records.front());
  std::set<std::string> names;
  for (size_t c = 0; c < t.header.size(); ++c) {
    TR_CHECK(!t.header[c].empty(), "CSV ", path, ": column ", c + 1, " of the header has no name");
    TR_CHECK(names.insert(t.header[c]).second, "CSV ", path, ": the header names column '", t.header[c], "' twice");
  }
  for (size_t r = 1; r < sink.records.size(); ++r) {
    auto& rec = sink.records[r];
    if (rec.size() == 1 && rec[0].empty()) continue;  // a blank line
    TR_CHECK(rec.size() == t.header.size(), "CSV ", path, ": record ", t.rows.size() + 1, " (line ", sink.lines[r],
             ") has ", rec.size(), " fields, the header ", t.header.size());
    t.rows.push_back(std::move(rec));
    t.row_line.push_back(sink.lines[r]);
  }
  return t;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TR_CHECK(f, "CSV ", path, ": cannot open the file");
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_csv(all.data(), all.size(), path);
}

size_t CsvTable::column(const std::string& name, const std::string& who) const {
  for (size_t c = 0; c < header.size(); ++c)
    if (header[c] == name) return c;
  throw Error(str("CSV ", path, ": ", who, " names column '", name,
                  "', which the header does not have (columns: ", header, ")"));
}

std::string CsvTable::where(size_t i) const { return str(path, ": record ", i + 1, " (line ", row_line[i], ")"); }

double csv_number(const CsvTable& t, size_t row, size_t col) {
  const std::string& s = t.rows[row][col];
  const char* b = s.c_str();
  while (*b == ' ' || *b == '\t') ++b;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(b, &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  const bool ok = end != b && *end == 0 && errno != ERANGE && std::isfinite(v);
  TR_CHECK(ok, "CSV ", t.where(row), ", column '", t.header[col], "': '", s, "' is not a finite number");
  return v;
}

}  // namespace tr::data
