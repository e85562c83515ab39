// The CSV layer under AddressSanitizer and UBSan: every prefix of a quoted table, and random bytes
// from CSV's alphabet, either parse (then every cell is read as a number or refused) or fail with
// an Error.
#include <catch2/catch.hpp>
#include <random>
#include "core/error.h"
#include "data/csv_table.h"

namespace test_csv_table {

using namespace tr;
using namespace tr::data;

namespace {
void parse_exact(const std::string& src, size_t n) {
  std::vector<char> b(src.begin(), src.begin() + long(n));  // exactly n bytes, no terminator after them
  try {
    CsvTable t = parse_csv(b.data(), b.size(), "t.csv");
    for (size_t r = 0; r < t.rows.size(); ++r)
      for (size_t c = 0; c < t.header.size(); ++c) {
        try {
          (void)csv_number(t, r, c);
        } catch (const Error&) {}
      }
  } catch (const Error&) {}
}
}  // namespace

TEST_CASE("CSV tables: every prefix and random bytes stay inside the buffer", "[asan][csv]") {
  const std::string table = "id,\"a b\",c\r\n1,\"x,\"\"y\"\"\n z\",2.5e3\r\n2, 3 ,\"\"\n3,4,5";
  for (size_t n = 0; n <= table.size(); ++n) parse_exact(table, n);
  std::mt19937 gen(11);
  const std::string alphabet = "a1.,\"\n\r -e";
  for (int k = 0; k < 3000; ++k) {
    std::string s(size_t(gen() % 64), ' ');
    for (char& ch : s) ch = alphabet[gen() % alphabet.size()];
    parse_exact(s, s.size());
  }
}

}  // namespace test_csv_table
