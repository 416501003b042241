#pragma once
// The items of a comma-separated command-line value ("a,b,c"), empty items left out.
#include <string>
#include <vector>

namespace kiln::bench {

inline std::vector<std::string> split_list(const std::string &text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) items.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace kiln::bench
