// The runtime's thread pool: static chunks covering the range once, statuses, nesting, several
// callers at once, the process-wide pool and its size.
#include "deploy/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kiln::deploy {
namespace {

// Records every iteration and the threads that ran chunks.
struct Record {
  std::vector<std::atomic<int>> hits;
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  explicit Record(int64_t n) : hits(static_cast<size_t>(n)) {}
};

int32_t record_body(int64_t begin, int64_t end, void *closure) {
  auto *r = static_cast<Record *>(closure);
  for (int64_t i = begin; i < end; ++i) r->hits[static_cast<size_t>(i)].fetch_add(1);
  std::lock_guard<std::mutex> lock(r->mutex);
  r->threads.insert(std::this_thread::get_id());
  r->chunks.push_back({begin, end});
  return 0;
}

TEST(ThreadPoolTest, EveryIterationRunsExactlyOnceInStaticChunks) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 100, 1001}) {
    Record r(n);
    EXPECT_EQ(pool.parallel_for(record_body, n, &r), 0);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(r.hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    // Static chunking: at most one chunk per thread, all of one size except the last.
    EXPECT_LE(r.chunks.size(), 4u);
    const int64_t chunk = (n + 3) / 4;
    for (auto [b, e] : r.chunks) {
      EXPECT_EQ(b % chunk, 0);
      EXPECT_TRUE(e - b == chunk || e == n);
    }
  }
}

// The caller's chunk waits (up to 10 s) until `workers` workers have entered chunks of their own,
// so the caller cannot take the workers' chunks before they come.
struct WaitForWorkers {
  Record record;
  int workers;
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> came{0};
  WaitForWorkers(int64_t n, int workers) : record(n), workers(workers) {}
};

int32_t wait_for_workers(int64_t begin, int64_t end, void *closure) {
  auto *w = static_cast<WaitForWorkers *>(closure);
  if (std::this_thread::get_id() == w->caller) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (w->came.load() < w->workers && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  } else {
    w->came.fetch_add(1);
  }
  return record_body(begin, end, &w->record);
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(3);
  WaitForWorkers w(3000, 2);
  ASSERT_EQ(pool.parallel_for(wait_for_workers, 3000, &w), 0);
  EXPECT_EQ(w.record.threads.size(), 3u);
  EXPECT_TRUE(w.record.threads.count(std::this_thread::get_id())) << "the caller runs the first chunk";
  for (const auto &h : w.record.hits) EXPECT_EQ(h.load(), 1);
}

// A worker that sleeps (its spin ran out long ago) does not hold a short loop up: the caller, done
// with its own chunk, runs the chunk the worker has not claimed yet. Waking a sleeping thread takes
// microseconds, the caller's empty chunk far less, so the caller takes it (five tries, any one
// enough: without the claim the worker's chunk never runs on the caller).
TEST(ThreadPoolTest, TheCallerRunsAChunkItsSleepingWorkerHasNotClaimed) {
  ThreadPool pool(2);
  bool caller_ran_both = false;
  for (int attempt = 0; attempt < 5 && !caller_ran_both; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Record r(2);
    ASSERT_EQ(pool.parallel_for(record_body, 2, &r), 0);
    ASSERT_EQ(r.hits[0].load(), 1);
    ASSERT_EQ(r.hits[1].load(), 1);
    caller_ran_both = r.threads.size() == 1 && r.threads.count(std::this_thread::get_id()) == 1;
  }
  EXPECT_TRUE(caller_ran_both);
}

TEST(ThreadPoolTest, EmptyRangeRunsNothing) {
  ThreadPool pool(2);
  Record r(1);
  EXPECT_EQ(pool.parallel_for(record_body, 0, &r), 0);
  EXPECT_EQ(pool.parallel_for(record_body, -5, &r), 0);
  EXPECT_TRUE(r.chunks.empty());
}

int32_t fail_in_second_half(int64_t begin, int64_t end, void *closure) {
  auto *n = static_cast<int64_t *>(closure);
  for (int64_t i = begin; i < end; ++i) {
    if (i >= *n / 2) return 7;
  }
  return 0;
}

TEST(ThreadPoolTest, ReturnsTheStatusOfAFailingChunk) {
  ThreadPool pool(4);
  int64_t n = 100;
  EXPECT_EQ(pool.parallel_for(fail_in_second_half, n, &n), 7);
  // The pool is still usable afterwards.
  Record r(10);
  EXPECT_EQ(pool.parallel_for(record_body, 10, &r), 0);
}

struct Nested {
  ThreadPool *pool;
  std::atomic<int> total{0};
  std::atomic<int> inner_threads_mismatch{0};
};

int32_t inner_body(int64_t begin, int64_t end, void *closure) {
  auto *n = static_cast<Nested *>(closure);
  n->total.fetch_add(static_cast<int>(end - begin));
  return 0;
}

int32_t outer_body(int64_t begin, int64_t end, void *closure) {
  auto *n = static_cast<Nested *>(closure);
  for (int64_t i = begin; i < end; ++i) {
    EXPECT_TRUE(in_parallel_region());
    // A nested loop runs serially on this thread, through the pool and through the C entry.
    const auto me = std::this_thread::get_id();
    struct Check {
      std::thread::id me;
      Nested *n;
    } check{me, n};
    auto body = [](int64_t b, int64_t e, void *c) -> int32_t {
      auto *ck = static_cast<Check *>(c);
      if (std::this_thread::get_id() != ck->me) ck->n->inner_threads_mismatch.fetch_add(1);
      return inner_body(b, e, ck->n);
    };
    if (n->pool->parallel_for(body, 10, &check) != 0) return 1;
    if (KilnParallelFor(body, 10, &check) != 0) return 1;
  }
  return 0;
}

TEST(ThreadPoolTest, NestedLoopsRunSeriallyInside) {
  ThreadPool pool(4);
  Nested n;
  n.pool = &pool;
  EXPECT_FALSE(in_parallel_region());
  ASSERT_EQ(pool.parallel_for(outer_body, 8, &n), 0);
  EXPECT_EQ(n.total.load(), 8 * 20);
  EXPECT_EQ(n.inner_threads_mismatch.load(), 0);
  EXPECT_FALSE(in_parallel_region());
}

TEST(ThreadPoolTest, SeveralCallersAtOnceAllComplete) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        Record r(64);
        if (pool.parallel_for(record_body, 64, &r) != 0) failures.fetch_add(1);
        for (auto &h : r.hits) {
          if (h.load() != 1) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto &t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPoolTest, ManyShortLoopsInARow) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 500; ++rep) {
    Record r(2);
    ASSERT_EQ(pool.parallel_for(record_body, 2, &r), 0);
    ASSERT_EQ(r.hits[0].load() + r.hits[1].load(), 2);
  }
}

int32_t count_body(int64_t begin, int64_t end, void *closure) {
  auto *hits = static_cast<std::atomic<int64_t> *>(closure);
  for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// Loops so short, on more threads than cores, that the caller often runs a worker's chunk while the
// worker, which saw the loop start, has not claimed it yet (preempted in between): the worker's late
// claim must fail (the chunk ran once, and the loops after it are not disturbed), and no loop may
// wait for a chunk that will never finish.
TEST(ThreadPoolTest, HundredsOfThousandsOfTinyLoopsEachRunEveryIterationOnce) {
  ThreadPool pool(8);
  std::atomic<int64_t> hits[16];
  int64_t wrong = 0;
  for (int rep = 0; rep < 300000; ++rep) {
    const int64_t n = 8 + rep % 9;
    for (auto &h : hits) h.store(0, std::memory_order_relaxed);
    ASSERT_EQ(pool.parallel_for(count_body, n, hits), 0);
    for (int64_t i = 0; i < n; ++i) wrong += hits[i].load() != 1;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(ThreadPoolTest, RejectsZeroThreads) {
  EXPECT_THROW(ThreadPool(0), kiln::UserError);
  EXPECT_THROW(set_num_threads(-1), kiln::UserError);
}

TEST(ThreadPoolTest, GlobalPoolSizeFollowsTheSetting) {
  EXPECT_GE(physical_core_count(), 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  WaitForWorkers r(30, 2);
  EXPECT_EQ(KilnParallelFor(wait_for_workers, 30, &r), 0);
  EXPECT_EQ(r.record.threads.size(), 3u);
  set_num_threads(1);
  Record one(30);
  EXPECT_EQ(KilnParallelFor(record_body, 30, &one), 0);
  EXPECT_EQ(one.threads.size(), 1u);
  set_num_threads(0);  // back to the default
  EXPECT_GE(num_threads(), 1);
}

TEST(ThreadPoolTest, RuntimeApiPointsAtTheParallelFor) {
  const KilnRuntimeApi *api = KilnGetRuntimeApi();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->abi_version, KILN_ABI_VERSION);
  EXPECT_EQ(api->parallel_for, &KilnParallelFor);
  EXPECT_EQ(KilnParallelFor(nullptr, 10, nullptr), kKilnErrorArgument);
}

}  // namespace
}  // namespace kiln::deploy
