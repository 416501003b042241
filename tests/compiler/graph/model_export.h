#pragma once
// The models of tests/frontend/make_models.py in the graph tests: a test skips only when they cannot
// be exported here (no python, or the script's status 77: torch, torchvision or onnx missing); any
// other failure of the script fails the test with what the script printed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/frontend/make_models.h"

namespace kiln::test {

struct ModelExport {
  int status;          // make_model's: the script's exit status, -1 when it did not run to the end
  std::string output;  // what it printed, its standard output then its standard error
};

// Runs make_models.py for `model` (test::make_model), its output captured.
inline ModelExport export_model(const std::string &model) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ModelExport e;
  e.status = make_model(model);
  e.output = ::testing::internal::GetCapturedStdout();
  e.output += ::testing::internal::GetCapturedStderr();
  return e;
}

}  // namespace kiln::test

// In a test, or a helper returning void: exports `model` (a std::string), skips when torch or
// python is missing, fails on any other non-zero status with the script's output.
#define KILN_REQUIRE_MODEL(model)                                                                   \
  do {                                                                                              \
    if (!std::filesystem::exists(::kiln::test::kModelsPython))                                      \
      GTEST_SKIP() << ::kiln::test::kModelsPython << " is missing: cannot export " << (model);      \
    const ::kiln::test::ModelExport kiln_export_ = ::kiln::test::export_model(model);               \
    if (kiln_export_.status == ::kiln::test::kNoTorch)                                              \
      GTEST_SKIP() << "torch, torchvision or onnx is missing: " << (model) << " not exported";      \
    if (kiln_export_.status != 0)                                                                   \
      FAIL() << "make_models.py " << (model) << " failed (status " << kiln_export_.status << "):\n" \
             << kiln_export_.output;                                                                \
  } while (0)
