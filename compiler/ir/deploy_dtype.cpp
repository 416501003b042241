#include "compiler/ir/deploy_dtype.h"

#include "compiler/ir/error.h"

namespace kiln::ir {

DataType to_ir_type(const deploy::DType &t) {
  switch (t.code) {
    case deploy::DType::Int:
      return Int(t.bits, t.lanes);
    case deploy::DType::UInt:
      return UInt(t.bits, t.lanes);
    case deploy::DType::Float:
      return Float(t.bits, t.lanes);
  }
  throw RuntimeError("unknown tensor dtype " + t.to_string());
}

deploy::DType to_deploy_dtype(const DataType &t) {
  deploy::DType d;
  switch (t.code()) {
    case DataType::Code::Int:
      d.code = deploy::DType::Int;
      break;
    case DataType::Code::UInt:
      d.code = deploy::DType::UInt;
      break;
    case DataType::Code::Float:
      d.code = deploy::DType::Float;
      break;
    case DataType::Code::Handle:
      throw ExprError("a handle has no tensor dtype");
  }
  d.bits = static_cast<uint8_t>(t.bits());
  d.lanes = static_cast<uint16_t>(t.lanes());
  return d;
}

}  // namespace kiln::ir
