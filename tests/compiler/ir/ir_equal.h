#pragma once
// EXPECT_TRUE(ir_equal(actual, expected)): IR compared with ir::structural_equal (variables bound
// inside the trees matched by position, free variables by identity), printing both sides when they
// differ.
#include <gtest/gtest.h>

#include <string>

#include "compiler/ir/ir.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/structural.h"

namespace kiln::ir::testing {

inline ::testing::AssertionResult ir_equal(const Expr &actual, const Expr &expected) {
  if (structural_equal(actual, expected)) return ::testing::AssertionSuccess();
  auto typed = [](const Expr &e) {
    return e.defined() ? to_string(e) + " (" + e.type().to_string() + ")" : std::string("(undefined)");
  };
  return ::testing::AssertionFailure() << "IR differs.\n--- actual:   " << typed(actual)
                                       << "\n--- expected: " << typed(expected);
}

inline ::testing::AssertionResult ir_equal(const Stmt &actual, const Stmt &expected) {
  if (structural_equal(actual, expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "IR differs.\n--- actual:\n"
                                       << to_string(actual) << "--- expected:\n"
                                       << to_string(expected);
}

}  // namespace kiln::ir::testing
