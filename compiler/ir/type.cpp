#include "compiler/ir/type.h"

#include <stdexcept>

#include "compiler/ir/error.h"

namespace kiln::ir {

std::string DataType::to_string() const {
  std::string s;
  if (is_bool()) {
    s = "bool";
  } else {
    switch (code_) {
      case Code::Int:
        s = "int";
        break;
      case Code::UInt:
        s = "uint";
        break;
      case Code::Float:
        s = "float";
        break;
      case Code::Handle:
        return "handle";
    }
    s += std::to_string(bits_);
  }
  if (lanes_ != 1) s += "x" + std::to_string(lanes_);
  return s;
}

DataType DataType::parse(const std::string &text) {
  std::string s = text;
  int lanes = 1;
  auto x = s.find('x');
  if (x != std::string::npos) {
    try {
      lanes = std::stoi(s.substr(x + 1));
    } catch (const std::exception &) {
      throw ExprError("bad vector lanes in dtype '" + text + "'");
    }
    s = s.substr(0, x);
  }
  if (lanes < 1) throw ExprError("bad vector lanes in dtype '" + text + "'");
  if (s == "bool") return Bool(lanes);
  if (s == "handle") return Handle();
  auto parse_bits = [&](size_t prefix) {
    try {
      size_t used = 0;
      int b = std::stoi(s.substr(prefix), &used);
      if (used != s.size() - prefix) throw std::invalid_argument("");
      return b;
    } catch (const std::exception &) {
      throw ExprError("unknown dtype '" + text + "'");
    }
  };
  if (s.rfind("uint", 0) == 0) {
    int b = parse_bits(4);
    if (b == 8 || b == 16 || b == 32 || b == 64) return UInt(b, lanes);
  } else if (s.rfind("int", 0) == 0) {
    int b = parse_bits(3);
    if (b == 8 || b == 16 || b == 32 || b == 64) return Int(b, lanes);
  } else if (s.rfind("float", 0) == 0) {
    int b = parse_bits(5);
    if (b == 16 || b == 32 || b == 64) return Float(b, lanes);
  }
  throw ExprError("unknown dtype '" + text + "'");
}

}  // namespace kiln::ir
