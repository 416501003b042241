#pragma once
// Table: aligned text columns for people reading the output of a `kiln` command. Columns whose
// cells are all numbers (or "-") are right-aligned, the others left-aligned.
#include <ostream>
#include <string>
#include <vector>

namespace kiln::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  void print(std::ostream &out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Two columns, name and value, without a header: for one object's fields.
void print_fields(std::ostream &out, const std::vector<std::pair<std::string, std::string>> &fields);

// `text` cut to at most `width` characters, ending in "..." when it was cut.
std::string abbreviate(const std::string &text, size_t width);

}  // namespace kiln::cli
