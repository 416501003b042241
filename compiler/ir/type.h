#pragma once
// DataType: the scalar or vector type of an IR value.
#include <cstdint>
#include <string>

namespace kiln::ir {

class DataType {
 public:
  enum class Code : uint8_t { Int = 0, UInt = 1, Float = 2, Handle = 3 };

  DataType() = default;
  DataType(Code code, int bits, int lanes = 1) : code_(code), bits_(bits), lanes_(lanes) {}

  Code code() const { return code_; }
  int bits() const { return bits_; }
  int lanes() const { return lanes_; }
  int bytes() const { return (bits_ + 7) / 8; }

  bool is_int() const { return code_ == Code::Int; }
  bool is_uint() const { return code_ == Code::UInt && bits_ != 1; }
  bool is_bool() const { return code_ == Code::UInt && bits_ == 1; }
  bool is_float() const { return code_ == Code::Float; }
  bool is_float16() const { return code_ == Code::Float && bits_ == 16; }
  bool is_handle() const { return code_ == Code::Handle; }
  bool is_scalar() const { return lanes_ == 1; }
  bool is_vector() const { return lanes_ > 1; }
  // Int or UInt (bool included).
  bool is_integer_like() const { return code_ == Code::Int || code_ == Code::UInt; }

  DataType element_of() const { return DataType(code_, bits_, 1); }
  DataType with_lanes(int lanes) const { return DataType(code_, bits_, lanes); }
  DataType with_bits(int bits) const { return DataType(code_, bits, lanes_); }

  bool operator==(const DataType &o) const { return code_ == o.code_ && bits_ == o.bits_ && lanes_ == o.lanes_; }
  bool operator!=(const DataType &o) const { return !(*this == o); }

  // "float32", "int8x16", "bool", "handle".
  std::string to_string() const;
  // Parses the form to_string() prints; throws ExprError (a user error) naming the text otherwise.
  static DataType parse(const std::string &s);

 private:
  Code code_ = Code::Int;
  int bits_ = 32;
  int lanes_ = 1;
};

inline DataType Int(int bits, int lanes = 1) { return DataType(DataType::Code::Int, bits, lanes); }
inline DataType UInt(int bits, int lanes = 1) { return DataType(DataType::Code::UInt, bits, lanes); }
inline DataType Float(int bits, int lanes = 1) { return DataType(DataType::Code::Float, bits, lanes); }
inline DataType Bool(int lanes = 1) { return DataType(DataType::Code::UInt, 1, lanes); }
inline DataType Handle() { return DataType(DataType::Code::Handle, 64, 1); }

}  // namespace kiln::ir
