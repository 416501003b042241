#pragma once
// The IR type of a runtime tensor's dtype (deploy::DType) and back.
#include "compiler/ir/type.h"
#include "deploy/tensor.h"

namespace kiln::ir {

// Bool is uint1 on both sides. to_ir_type throws RuntimeError for a code it does not know,
// to_deploy_dtype throws ExprError for a handle, which no tensor holds.
DataType to_ir_type(const deploy::DType &t);
deploy::DType to_deploy_dtype(const DataType &t);

}  // namespace kiln::ir
