#pragma once
// Helpers shared by the tuning-log tests: a temporary directory and a compact record factory.
#include "db/tuning_db.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::db::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln_db_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string path(const std::string &name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

inline Workload dense(int m, int n = 64, int k = 64) {
  return Workload::make("dense", {{"M", m}, {"N", n}, {"K", k}, {"dtype", "float32"}}, 2.0 * m * n * k);
}

inline Target znver4() { return Target::make("llvm -mcpu=znver4", "x86-znver4"); }
inline Target znver4_avx512() { return Target::make("llvm -mcpu=znver4 -mattr=+avx512f", "x86-znver4"); }
inline Target skylake() { return Target::make("llvm -mcpu=skylake", "x86-skylake"); }

// A valid record of `workload` on `target`, config `index`, whose costs all equal `seconds`.
inline Record measured(const Workload &workload, const Target &target, int64_t index, double seconds, int repeats = 3) {
  Record r;
  r.workload = workload;
  r.target = target;
  r.config.index = index;
  r.config.space = "space-v1";
  r.config.knobs = {{"tile_x", contracts::Json::array({1, static_cast<int>(index % 16 + 1)})}, {"unroll", index % 2}};
  r.costs.assign(static_cast<size_t>(repeats), seconds);
  r.wall_s = 0.5;
  r.runner = "runner-test";
  r.timestamp = 1700000000.0 + static_cast<double>(index);
  return r;
}

inline Record failed(const Workload &workload, const Target &target, int64_t index,
                     ErrorClass error = ErrorClass::kCompileHost) {
  Record r = measured(workload, target, index, 0, 0);
  r.error = error;
  r.error_message = "failed on purpose";
  return r;
}

}  // namespace kiln::db::testing
