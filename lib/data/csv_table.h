// A CSV file as text cells: a header row, then records (RFC 4180: quoted fields may hold commas,
// quotes and newlines), parsed by libcsv. Each record remembers the line it ends on, for errors.
// The format layer alone (no tensor: it also builds into the sanitizer test binary).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tr::data {

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as many cells as the header
  std::vector<int64_t> row_line;               // the line each record ends on (1-based; the header is line 1)

  // The index of a header column; an Error naming the file, `who` and the columns where none is.
  size_t column(const std::string& name, const std::string& who) const;
  // "<path>: record <r> (line <l>)": where an error about row i is
  std::string where(size_t i) const;
};

// Parses `size` bytes of CSV. Errors name `path` and the line: malformed quoting, a record with
// another number of fields than the header, no header, an empty or duplicate column name.
CsvTable parse_csv(const char* data, size_t size, const std::string& path);
// The file read whole, then parse_csv.
CsvTable read_csv(const std::string& path);

// A cell as a number: the whole cell (spaces around it allowed) is a decimal or exponent number,
// else an Error naming the table's place, the column and the text.
double csv_number(const CsvTable& t, size_t row, size_t col);

}  // namespace tr::data
