// Illegal schedules raise ScheduleError with a message that names the stage and the axis; never a
// crash or an internal error.
#include <gtest/gtest.h>

#include <functional>

#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"

namespace kiln {
namespace {

using namespace ir;

struct Fixture {
  te::Tensor A, B, C, D;
  std::unique_ptr<te::Schedule> s;
  Fixture() {
    A = te::placeholder({16, 16}, Float(32), "A");
    B = te::compute(
        {16, 16}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
    auto k = te::reduce_axis(16, "k");
    C = te::compute(
        {16}, [&](Var i) { return te::sum(B(i, k), {k}); }, "C");
    D = te::compute(
        {16, 16}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "D");
    s = te::create_schedule(std::vector<te::Tensor>{C, D});
  }
  te::Stage operator[](const te::Tensor &t) { return (*s)[t]; }
};

// Runs f, which must throw ScheduleError whose message contains every fragment.
void expect_schedule_error(const std::function<void(Fixture &)> &f, const std::vector<std::string> &fragments) {
  Fixture fx;
  try {
    f(fx);
    ADD_FAILURE() << "no error was raised";
  } catch (const ScheduleError &e) {
    std::string msg = e.what();
    for (const auto &frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "raised something other than ScheduleError: " << e.what();
  }
}

TEST(ScheduleErrors, SplitAnAxisThatWasSplit) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar o, i;
        auto st = f[f.B];
        IterVar x = st.axis(0);
        st.split(x, 4, &o, &i);
        st.split(x, 2, &o, &i);
      },
      {"stage B", "axis i", "split into i.outer and i.inner"});
}

TEST(ScheduleErrors, SplitAnAxisThatWasFused) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar fused, o, i;
        auto st = f[f.B];
        st.fuse(st.axis(0), st.axis(1), &fused);
        st.split(st.axis(1), 4, &o, &i);
      },
      {"stage B", "axis j", "fused into i.j.fused"});
}

TEST(ScheduleErrors, SplitByZero) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar o, i;
        f[f.B].split(f[f.B].axis(0), 0, &o, &i);
      },
      {"stage B", "axis i", "positive"});
}

TEST(ScheduleErrors, AxisOfAnotherStage) {
  expect_schedule_error([](Fixture &f) { f[f.B].vectorize(f[f.D].axis(1)); },
                        {"stage B", "axis j", "does not belong to this stage"});
}

TEST(ScheduleErrors, FuseNonAdjacent) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar o, i, fused;
        auto st = f[f.B];
        st.split(st.axis(1), 4, &o, &i);
        st.fuse(st.axis(0), i, &fused);
      },
      {"stage B", "cannot fuse i and j.inner", "not adjacent"});
}

TEST(ScheduleErrors, FuseDataWithReduceAxis) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar fused;
        auto st = f[f.C];
        st.fuse(st.axis(0), st.reduce_axis(0), &fused);
      },
      {"stage C", "reduction axis"});
}

TEST(ScheduleErrors, ReorderListsAxisTwice) {
  expect_schedule_error(
      [](Fixture &f) {
        f[f.B].reorder({f[f.B].axis(0), f[f.B].axis(0)});
      },
      {"stage B", "axis i", "twice"});
}

TEST(ScheduleErrors, ComputeAtNonConsumer) {
  expect_schedule_error([](Fixture &f) { f[f.B].compute_at(f[f.D], f[f.D].axis(0)); },
                        {"stage B", "D does not read B"});
}

TEST(ScheduleErrors, ComputeAtAxisOfWrongStage) {
  expect_schedule_error([](Fixture &f) { f[f.B].compute_at(f[f.C], f[f.D].axis(0)); },
                        {"stage B", "axis i", "not a loop of that stage"});
}

TEST(ScheduleErrors, ComputeAtAnOutput) {
  expect_schedule_error([](Fixture &f) { f[f.D].compute_at(f[f.C], f[f.C].axis(0)); }, {"stage D", "output"});
}

TEST(ScheduleErrors, InlineAReduction) {
  expect_schedule_error(
      [](Fixture &) {
        auto A = te::placeholder({8, 8}, Float(32), "A");
        auto k = te::reduce_axis(8, "k");
        auto R = te::compute(
            {8}, [&](Var i) { return te::sum(A(i, k), {k}); }, "R");
        auto Y = te::compute(
            {8}, [&](Var i) { return R(i) + 1.0f; }, "Y");
        auto s = te::create_schedule({Y});
        (*s)[R].compute_inline();
      },
      {"stage R", "reduction"});
}

TEST(ScheduleErrors, InlineAnOutput) {
  expect_schedule_error([](Fixture &f) { f[f.D].compute_inline(); }, {"stage D", "output"});
}

TEST(ScheduleErrors, BindOneAxisTwice) {
  expect_schedule_error(
      [](Fixture &f) {
        auto st = f[f.D];
        st.bind(st.axis(0), "blockIdx.x");
        st.bind(st.axis(0), "threadIdx.x");
      },
      {"stage D", "axis i", "already bound to blockIdx.x"});
}

TEST(ScheduleErrors, BindTwoAxesToOneThread) {
  expect_schedule_error(
      [](Fixture &f) {
        auto st = f[f.D];
        st.bind(st.axis(0), "threadIdx.x");
        st.bind(st.axis(1), "threadIdx.x");
      },
      {"stage D", "axis j", "axis i is already bound to it"});
}

TEST(ScheduleErrors, BindToUnknownTag) {
  expect_schedule_error([](Fixture &f) { f[f.D].bind(f[f.D].axis(0), "warpIdx.x"); },
                        {"stage D", "axis i", "warpIdx.x"});
}

TEST(ScheduleErrors, VectorizeReductionAxis) {
  expect_schedule_error([](Fixture &f) { f[f.C].vectorize(f[f.C].reduce_axis(0)); },
                        {"stage C", "axis k", "reduction axis"});
}

TEST(ScheduleErrors, ParallelReductionAxis) {
  expect_schedule_error([](Fixture &f) { f[f.C].parallel(f[f.C].reduce_axis(0)); },
                        {"stage C", "axis k", "reduction axis"});
}

TEST(ScheduleErrors, UnrollAParallelAxis) {
  expect_schedule_error(
      [](Fixture &f) {
        f[f.D].parallel(f[f.D].axis(0));
        f[f.D].unroll(f[f.D].axis(0));
      },
      {"stage D", "axis i", "already parallel"});
}

TEST(ScheduleErrors, RfactorDataAxis) {
  expect_schedule_error([](Fixture &f) { f.s->rfactor(f.C, f[f.C].axis(0)); },
                        {"stage C", "axis i", "not a reduction axis"});
}

TEST(ScheduleErrors, CacheWriteAfterSplit) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar o, i;
        f[f.C].split(f[f.C].axis(0), 4, &o, &i);
        f.s->cache_write(f.C, "local");
      },
      {"stage C", "cache_write"});
}

TEST(ScheduleErrors, CacheReadByNonReader) {
  expect_schedule_error([](Fixture &f) { f.s->cache_read(f.B, "shared", {f.D.op()}); }, {"stage D does not read it"});
}

TEST(ScheduleErrors, StorageAlignBadFactor) {
  expect_schedule_error([](Fixture &f) { f[f.B].storage_align(f[f.B].axis(0), 8, 9); },
                        {"stage B", "axis i", "offset < factor"});
}

TEST(ScheduleErrors, AttachPointSplitAfterComputeAt) {
  expect_schedule_error(
      [](Fixture &f) {
        auto sc = f[f.C];
        IterVar x = sc.axis(0);
        f[f.B].compute_at(sc, x);
        IterVar o, i;
        sc.split(x, 4, &o, &i);
        lower::lower(*f.s, {f.A, f.C, f.D}, "f");
      },
      {"stage B", "axis i", "no longer a loop of C"});
}

TEST(ScheduleErrors, ThreadExtentsDisagree) {
  expect_schedule_error(
      [](Fixture &) {
        auto A = te::placeholder({64}, Float(32), "A");
        auto B = te::compute(
            {64}, [&](Var i) { return A(i) + 1.0f; }, "B");
        auto C = te::compute(
            {64}, [&](Var i) { return B(i) * 2.0f; }, "C");
        auto s = te::create_schedule({C});
        IterVar bo, bi, co, ci;
        (*s)[C].split((*s)[C].axis(0), 8, &co, &ci);
        (*s)[C].bind(ci, "threadIdx.x");
        (*s)[B].compute_at((*s)[C], ci);
        (*s)[B].set_scope("shared");
        (*s)[B].split((*s)[B].axis(0), 16, &bo, &bi);
        (*s)[B].bind(bi, "threadIdx.x");
        lower::lower(*s, {A, C}, "f");
      },
      {"threadIdx.x", "larger than the enclosing"});
}

TEST(ScheduleErrors, FuseAnAnnotatedAxis) {
  expect_schedule_error(
      [](Fixture &f) {
        IterVar fused;
        auto st = f[f.D];
        st.vectorize(st.axis(1));
        st.fuse(st.axis(0), st.axis(1), &fused);
      },
      {"stage D", "axis j", "already vectorized"});
}

TEST(ScheduleErrors, ReaderOutsideTheAttachPoint) {
  expect_schedule_error(
      [](Fixture &) {
        auto A = te::placeholder({8, 8}, Float(32), "A");
        auto k = te::reduce_axis(8, "k");
        auto M = te::compute(
            {8}, [&](Var i) { return te::max(A(i, k), {k}); }, "M");
        auto E = te::compute(
            {8, 8}, [&](Var i, Var j) { return A(i, j) - M(i); }, "E");
        auto O = te::compute(
            {8, 8}, [&](Var i, Var j) { return E(i, j) * 2.0f; }, "O");
        auto s = te::create_schedule({O});
        (*s)[M].compute_at((*s)[O], (*s)[O].axis(0));  // E, which reads M, stays at the root
        lower::lower(*s, {A, O}, "f");
      },
      {"stage M", "reader E", "does not run inside that loop"});
}

TEST(ComputeAt, AttachmentsInAnyOrder) {
  // M is attached before E, the stage that reads it, is attached: accepted, and correct.
  auto A = te::placeholder({8, 8}, Float(32), "A");
  auto k = te::reduce_axis(8, "k");
  auto M = te::compute(
      {8}, [&](Var i) { return te::max(A(i, k), {k}); }, "M");
  auto E = te::compute(
      {8, 8}, [&](Var i, Var j) { return A(i, j) - M(i); }, "E");
  auto O = te::compute(
      {8, 8}, [&](Var i, Var j) { return E(i, j) * 2.0f; }, "O");
  auto s = te::create_schedule({O});
  (*s)[M].compute_at((*s)[O], (*s)[O].axis(0));
  (*s)[E].compute_at((*s)[O], (*s)[O].axis(0));
  EXPECT_NO_THROW(lower::lower(*s, {A, O}, "f"));
}

}  // namespace
}  // namespace kiln
