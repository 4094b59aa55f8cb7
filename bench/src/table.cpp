// table.cpp - column-aligned text tables.
#include "uvhost/bench/table.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace uvhost::bench {
namespace {
// Display width in columns: counts UTF-8 code points, not bytes ("±" is one column).
std::size_t display_width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}
bool looks_numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+');
}
}  // namespace

TextTable::TextTable(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::add_separator() { rows_.emplace_back(); }

void TextTable::print(std::ostream& out) const {
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) width[c] = display_width(headers_[c]);
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
  auto rule = [&] {
    for (std::size_t c = 0; c < width.size(); ++c) out << (c ? "-+-" : "") << std::string(width[c], '-');
    out << '\n';
  };
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t pad = width[c] - display_width(cells[c]);
      out << (c ? " | " : "");
      if (!header && looks_numeric(cells[c])) out << std::string(pad, ' ') << cells[c];
      else out << cells[c] << std::string(pad, ' ');
    }
    out << '\n';
  };
  line(headers_, true);
  rule();
  for (const auto& row : rows_) {
    if (row.empty()) rule();
    else line(row, false);
  }
}

std::string TextTable::str() const {
  std::ostringstream out;
  print(out);
  return out.str();
}

}  // namespace uvhost::bench
