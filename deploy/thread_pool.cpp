#include "deploy/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::deploy {

namespace {

thread_local bool t_in_parallel = false;

// How long an idle worker spins (yielding now and then) before it sleeps.
constexpr std::chrono::microseconds kSpinTime{200};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Marks the calling thread as inside a parallel loop for its lifetime.
class ParallelRegion {
 public:
  ParallelRegion() : previous_(t_in_parallel) { t_in_parallel = true; }
  ~ParallelRegion() { t_in_parallel = previous_; }
  ParallelRegion(const ParallelRegion &) = delete;
  ParallelRegion &operator=(const ParallelRegion &) = delete;

 private:
  bool previous_;
};

int32_t run_serially(KilnParallelBody body, int64_t n, void *closure) {
  ParallelRegion region;
  return body(0, n, closure);
}

}  // namespace

struct ThreadPool::Impl {
  int num_threads = 1;
  std::vector<std::thread> workers;

  // Held by the caller running a loop; a second caller that cannot take it runs serially.
  std::mutex busy;

  // The current loop. Written by the caller before it bumps `generation`.
  KilnParallelBody body = nullptr;
  void *closure = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;
  std::atomic<int32_t> status{0};
  // Chunk i belongs to thread i, but whoever claims it for the current generation runs it: a worker
  // claims its own chunk; the caller, done with chunk 0, claims those whose workers have not come.
  std::vector<std::atomic<uint64_t>> claimed;
  std::atomic<int> finished{0};  // chunks of the current loop run to the end

  // Workers wait for `generation` to change; `sleep_mutex` guards its changes for sleepers.
  std::atomic<uint64_t> generation{0};
  std::mutex sleep_mutex;
  std::condition_variable wake;
  std::atomic<bool> stop{false};

  void run_chunk(int index) {
    const int64_t begin = static_cast<int64_t>(index) * chunk;
    if (begin >= n) return;
    const int64_t end = std::min(n, begin + chunk);
    const int32_t rc = body(begin, end, closure);
    if (rc != 0) {
      int32_t expected = 0;
      status.compare_exchange_strong(expected, rc, std::memory_order_relaxed);
    }
  }

  // Whether the caller of this claim gets to run chunk `index` of loop `gen`. A worker that saw
  // loop `gen` start may only get here after the caller has run the chunk and gone on to later
  // loops: the chunk's claim is then of a later generation, and stays.
  bool claim(int index, uint64_t gen) {
    std::atomic<uint64_t> &c = claimed[static_cast<size_t>(index)];
    uint64_t seen = c.load(std::memory_order_acquire);
    while (seen < gen) {
      if (c.compare_exchange_weak(seen, gen, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  void run_claimed(int index) {
    run_chunk(index);
    finished.fetch_add(1, std::memory_order_acq_rel);
  }

  void worker(int index) {
    ParallelRegion region;
    uint64_t seen = 0;
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
      int spins = 0;
      while (generation.load(std::memory_order_acquire) == seen) {
        cpu_relax();
        if (++spins % 64 == 0) {
          if (std::chrono::steady_clock::now() > spin_until) break;
          // Let a thread that shares this core (the caller, another program) run.
          std::this_thread::yield();
        }
      }
      if (generation.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(sleep_mutex);
        wake.wait(lock, [&] { return stop.load() || generation.load(std::memory_order_acquire) != seen; });
      }
      if (stop.load()) return;
      seen = generation.load(std::memory_order_acquire);
      if (claim(index, seen)) run_claimed(index);
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : impl_(std::make_unique<Impl>()) {
  if (num_threads < 1) {
    throw UserError("thread pool: needs at least 1 thread, got " + std::to_string(num_threads));
  }
  impl_->num_threads = num_threads;
  impl_->claimed = std::vector<std::atomic<uint64_t>>(static_cast<size_t>(num_threads));
  impl_->workers.reserve(static_cast<size_t>(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) impl_->workers.emplace_back([this, i] { impl_->worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> busy(impl_->busy);
    std::lock_guard<std::mutex> lock(impl_->sleep_mutex);
    impl_->stop.store(true);
    impl_->generation.fetch_add(1, std::memory_order_release);
  }
  impl_->wake.notify_all();
  for (auto &t : impl_->workers) t.join();
}

int ThreadPool::num_threads() const { return impl_->num_threads; }

int32_t ThreadPool::parallel_for(KilnParallelBody body, int64_t n, void *closure) {
  if (n <= 0) return 0;
  Impl &p = *impl_;
  if (p.num_threads == 1 || n == 1 || t_in_parallel) return run_serially(body, n, closure);
  std::unique_lock<std::mutex> busy(p.busy, std::try_to_lock);
  if (!busy.owns_lock()) return run_serially(body, n, closure);

  p.body = body;
  p.closure = closure;
  p.n = n;
  p.chunk = (n + p.num_threads - 1) / p.num_threads;
  p.status.store(0, std::memory_order_relaxed);
  p.finished.store(0, std::memory_order_relaxed);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(p.sleep_mutex);
    gen = p.generation.fetch_add(1, std::memory_order_release) + 1;
  }
  p.wake.notify_all();
  {
    ParallelRegion region;
    p.run_claimed(0);  // chunk 0 is the caller's alone
    // Chunks whose workers have not claimed them yet (asleep, or their core taken by another
    // program) run here rather than being waited for. A worker that is spinning claims its own
    // long before the caller finishes chunk 0, so each thread keeps its rows of consecutive loops.
    for (int i = 1; i < p.num_threads; ++i) {
      if (p.claim(i, gen)) p.run_claimed(i);
    }
  }
  int spins = 0;
  while (p.finished.load(std::memory_order_acquire) != p.num_threads) {
    cpu_relax();
    // Yield now and then: a worker still busy may share this core.
    if (++spins % 16 == 0) std::this_thread::yield();
  }
  return p.status.load(std::memory_order_relaxed);
}

int physical_core_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int logical = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) logical = CPU_COUNT(&set);
  if (logical <= 0) {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc > 0 ? static_cast<int>(hc) : 1;
  }
  std::set<std::pair<long, long>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(dir + "physical_package_id"), core(dir + "core_id");
    long package_id = -1, core_id = -1;
    if (!(package >> package_id) || !(core >> core_id)) return logical;
    cores.insert({package_id, core_id});
  }
  return cores.empty() ? logical : static_cast<int>(cores.size());
}

namespace {

std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;

int default_num_threads() {
  if (const char *e = std::getenv("KILN_NUM_THREADS")) {
    char *end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (end != e && *end == '\0' && v > 0 && v <= 4096) return static_cast<int>(v);
  }
  return physical_core_count();
}

std::shared_ptr<ThreadPool> current_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_shared<ThreadPool>(default_num_threads());
  return g_pool;
}

}  // namespace

ThreadPool &global_thread_pool() { return *current_pool(); }

void set_num_threads(int num_threads) {
  if (num_threads < 0) {
    throw UserError("set_num_threads: expected a count >= 0, got " + std::to_string(num_threads));
  }
  auto fresh = std::make_shared<ThreadPool>(num_threads == 0 ? default_num_threads() : num_threads);
  std::shared_ptr<ThreadPool> old;
  {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    old = std::move(g_pool);
    g_pool = std::move(fresh);
  }
  // The old pool is destroyed (after its running loop, if any) when its last user lets go.
}

int num_threads() { return current_pool()->num_threads(); }

bool in_parallel_region() { return t_in_parallel; }

}  // namespace kiln::deploy

extern "C" int32_t KilnParallelFor(KilnParallelBody body, int64_t n, void *closure) {
  if (body == nullptr) return kKilnErrorArgument;
  if (n <= 0) return kKilnOk;
  if (kiln::deploy::t_in_parallel) return kiln::deploy::run_serially(body, n, closure);
  return kiln::deploy::current_pool()->parallel_for(body, n, closure);
}

extern "C" const KilnRuntimeApi *KilnGetRuntimeApi(void) {
  static const KilnRuntimeApi api = {KILN_ABI_VERSION, &KilnParallelFor};
  return &api;
}
