// Property test: random legal schedules of a corpus of operators compute what the unscheduled
// operator computes, through the interpreter and through the C back end. A failure prints its
// seed and the schedule steps.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/compiler/schedule/corpus.h"
#include "tests/compiler/schedule/harness.h"
#include "tests/compiler/schedule/random_schedule.h"

namespace kiln {
namespace {

// Schedules per operator; 9 operators give over 2,000 in all.
int schedules_per_op() {
  const char *e = std::getenv("KILN_RANDOM_SCHEDULES");
  return e ? std::atoi(e) : 230;
}

class RandomSchedules : public ::testing::TestWithParam<int> {};

TEST_P(RandomSchedules, MatchUnscheduled) {
  auto make = testing::corpus().at(GetParam());
  const int count = schedules_per_op();
  int checked = 0;
  for (int it = 0; it < count; ++it) {
    uint64_t seed = 1000003ULL * static_cast<uint64_t>(GetParam() + 1) + static_cast<uint64_t>(it);
    testing::CorpusOp op = make();
    std::vector<te::Operation> outs;
    outs.push_back(op.args.back().op());
    auto s = te::create_schedule(outs);
    testing::RandomScheduler rs(seed);
    rs.apply(*s);
    SCOPED_TRACE("operator " + op.name + ", seed " + std::to_string(seed) + ": " + rs.log());
    testing::check_against_unscheduled(*s, op.args, op.shapes, op.tolerance, seed);
    ++checked;
    if (HasFailure()) break;
  }
  EXPECT_EQ(checked, count);
}

INSTANTIATE_TEST_SUITE_P(Corpus, RandomSchedules, ::testing::Range(0, 9));

}  // namespace
}  // namespace kiln
