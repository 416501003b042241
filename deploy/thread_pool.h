#pragma once
// ThreadPool: the persistent threads that run the parallel loops of compiled kernels.
//
// A parallel loop of n iterations is cut into static chunks, one per thread (the calling thread
// runs the first). Workers stay alive between loops: they spin briefly for the next loop and
// then sleep. A chunk whose worker has not started it when the caller has finished its own (the
// worker asleep, or its core taken by another program) is run by the caller instead of waited for. A parallel loop started from inside a chunk, or while another thread of the
// application is using the pool, runs serially on the thread that started it.
//
// Compiled modules reach the process-wide pool through the C entry point KilnParallelFor
// (deploy/c_abi.h), which loaders install into each module they load.
#include <cstdint>
#include <memory>

#include "contracts/error.h"
#include "deploy/c_abi.h"

namespace kiln::deploy {

class ThreadPool {
 public:
  // A pool of `num_threads` threads in all, the caller of parallel_for included (so
  // num_threads - 1 workers). Throws UserError unless num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int num_threads() const;

  // Runs body(begin, end, closure) over static chunks of [0, n) and returns 0, or the first
  // nonzero status a chunk returned (the other chunks still run to completion).
  int32_t parallel_for(KilnParallelBody body, int64_t n, void *closure);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The number of physical cores this process may run on (SMT siblings counted once); at least 1.
int physical_core_count();

// The process-wide pool: KILN_NUM_THREADS threads if that is set to a positive number, else one
// per physical core. Created on first use.
ThreadPool &global_thread_pool();

// Replaces the process-wide pool with one of `num_threads` threads (0: the default above). It
// waits for a parallel loop in progress to finish. Throws UserError if negative.
void set_num_threads(int num_threads);
int num_threads();

// Whether the calling thread is running a chunk of a parallel loop.
bool in_parallel_region();

}  // namespace kiln::deploy
