// Property test: random legal schedules of the corpus operators, compiled by the LLVM back end,
// compute what the interpreter computes for the unscheduled operator. A failure prints its seed
// and the schedule steps.
#include <gtest/gtest.h>

#include <cstdlib>

#include "compiler/codegen/llvm/llvm_module.h"
#include "tests/compiler/codegen/llvm_harness.h"
#include "tests/compiler/schedule/corpus.h"
#include "tests/compiler/schedule/harness.h"
#include "tests/compiler/schedule/random_schedule.h"

namespace kiln {
namespace {

// Schedules per operator (KILN_LLVM_RANDOM_SCHEDULES overrides).
int schedules_per_op() {
  const char *e = std::getenv("KILN_LLVM_RANDOM_SCHEDULES");
  return e ? std::atoi(e) : 40;
}

// Lowers `sch` and the unscheduled operator, runs the unscheduled one in the interpreter and the
// scheduled one compiled by LLVM on the same inputs, and compares every argument.
void check_llvm_against_interpreter(const te::Schedule &sch, const testing::CorpusOp &op, uint64_t seed,
                                    const std::string &target) {
  auto ref_sch = te::create_schedule(sch.outputs());
  ir::LoweredFunc ref = lower::lower(*ref_sch, op.args, "reference");
  ir::LoweredFunc f = lower::lower(sch, op.args, "scheduled");
  auto in = testing::make_args(ref, op.shapes, seed);
  auto expect = testing::run_interp(ref, in);
  std::vector<deploy::Tensor> got;
  for (const auto &a : in) got.push_back(testing::clone(a));
  codegen::LLVMBuildOptions options;
  options.target = target;
  codegen::LLVMModule m(f, options);
  ASSERT_EQ(m.call_status("scheduled", got), 0) << m.last_error() << "\n" << f;
  for (size_t i = 0; i < op.args.size(); ++i) {
    EXPECT_LE(testing::max_diff(expect[i], got[i]), op.tolerance) << "argument " << op.args[i].name() << "\n" << f;
  }
}

class LLVMRandomSchedules : public ::testing::TestWithParam<int> {};

TEST_P(LLVMRandomSchedules, MatchTheInterpreter) {
  auto make = testing::corpus().at(static_cast<size_t>(GetParam()));
  const int count = schedules_per_op();
  int checked = 0;
  for (int it = 0; it < count; ++it) {
    const uint64_t seed = 7000003ULL * static_cast<uint64_t>(GetParam() + 1) + static_cast<uint64_t>(it);
    testing::CorpusOp op = make();
    std::vector<te::Operation> outs = {op.args.back().op()};
    auto s = te::create_schedule(outs);
    testing::RandomScheduler rs(seed);
    rs.apply(*s);
    // Most schedules for the host; some for AVX2 and for baseline x86-64 (SSE2, no F16C).
    static const char *const targets[] = {"llvm -mcpu=native", "llvm -mcpu=native", "llvm -mcpu=x86-64-v3", "llvm"};
    static const bool x86 = codegen::LLVMTarget::host().triple.rfind("x86_64", 0) == 0;
    const std::string target = x86 ? targets[it % 4] : targets[0];
    SCOPED_TRACE("operator " + op.name + ", seed " + std::to_string(seed) + ", " + target + ": " + rs.log());
    check_llvm_against_interpreter(*s, op, seed, target);
    ++checked;
    if (HasFailure()) break;
  }
  EXPECT_EQ(checked, count);
}

INSTANTIATE_TEST_SUITE_P(Corpus, LLVMRandomSchedules, ::testing::Range(0, 9));

TEST(LLVMCorpusTest, UnscheduledOperatorsMatchTheInterpreter) {
  for (const auto &make : testing::corpus()) {
    testing::CorpusOp op = make();
    SCOPED_TRACE(op.name);
    auto s = te::create_schedule(std::vector<te::Operation>{op.args.back().op()});
    check_llvm_against_interpreter(*s, op, 11, "llvm -mcpu=native");
  }
}

}  // namespace
}  // namespace kiln
