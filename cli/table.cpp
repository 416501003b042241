#include "cli/table.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::cli {

namespace {

// Characters on screen, counting each UTF-8 sequence as one.
size_t display_width(const std::string &text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

bool is_number(const std::string &text) {
  if (text == "-") return true;
  if (text.empty()) return false;
  char *end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

void pad(std::ostream &out, size_t n) {
  for (size_t i = 0; i < n; ++i) out.put(' ');
}

}  // namespace

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream &out) const {
  size_t columns = header_.size();
  std::vector<size_t> width(columns);
  std::vector<bool> right(columns, !rows_.empty());
  for (size_t c = 0; c < columns; ++c) {
    width[c] = display_width(header_[c]);
    for (const auto &row : rows_) {
      width[c] = std::max(width[c], display_width(row[c]));
      if (!is_number(row[c])) right[c] = false;
    }
  }
  auto print_row = [&](const std::vector<std::string> &row) {
    for (size_t c = 0; c < columns; ++c) {
      size_t fill = width[c] - display_width(row[c]);
      bool last = c + 1 == columns;
      if (right[c]) pad(out, fill);
      out << row[c];
      if (!right[c] && !last) pad(out, fill);
      if (!last) out << "  ";
    }
    out << '\n';
  };
  print_row(header_);
  for (const auto &row : rows_) print_row(row);
}

void print_fields(std::ostream &out, const std::vector<std::pair<std::string, std::string>> &fields) {
  size_t width = 0;
  for (const auto &field : fields) width = std::max(width, display_width(field.first));
  for (const auto &[name, value] : fields) {
    out << name;
    pad(out, width - display_width(name) + 2);
    out << value << '\n';
  }
}

std::string abbreviate(const std::string &text, size_t width) {
  if (display_width(text) <= width || width < 4) return text;
  std::string result;
  size_t shown = 0;
  for (char c : text) {
    bool starts_character = (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    if (starts_character && ++shown > width - 3) break;
    result.push_back(c);
  }
  return result + "...";
}

}  // namespace kiln::cli
