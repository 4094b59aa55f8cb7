// table.h - plain-text tables for lab and bench output.
//
// Columns are sized to their widest cell; numbers are right-aligned, text left.
// The same rows go to JSON separately (labs build nlohmann::json themselves), so a
// table is only for people: no parsing of it is supported.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace uvhost::bench {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers);
  void add_row(std::vector<std::string> cells);
  // A horizontal rule before the next row (groups of rows, e.g. per thread count).
  void add_separator();
  void print(std::ostream& out) const;
  std::string str() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;  // an empty row is a separator
};

}  // namespace uvhost::bench
