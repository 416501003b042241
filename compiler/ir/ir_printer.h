#pragma once
// Readable text for IR: loops with kinds and extents, allocations with scope, stores, predicates.
#include <ostream>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::ir {

std::ostream &operator<<(std::ostream &os, const Expr &e);
std::ostream &operator<<(std::ostream &os, const Stmt &s);
std::ostream &operator<<(std::ostream &os, const Range &r);
std::ostream &operator<<(std::ostream &os, const IterVar &iv);

std::string to_string(const Expr &e);
std::string to_string(const Stmt &s);

}  // namespace kiln::ir
