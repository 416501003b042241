#include "compiler/driver/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "contracts/error.h"

namespace kiln::driver {

using ::kiln::detail::concat;

namespace {

int64_t align_up(int64_t v) { return (v + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

bool lifetimes_overlap(int a_first, int a_last, int b_first, int b_last) {
  return a_first <= b_last && b_first <= a_last;
}

// The root of request i's in-place chain (the request that owns the bytes).
int root_of(const std::vector<int> &parent, int i) {
  while (parent[static_cast<size_t>(i)] != i) i = parent[static_cast<size_t>(i)];
  return i;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest> &requests) {
  const size_t n = requests.size();
  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  // In-place pairs share one buffer whose lifetime is the union of theirs. A request is taken over
  // at most once: a second claimant keeps a buffer of its own.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> taken(n, false);
  for (size_t i = 0; i < n; ++i) {
    const BufferRequest &r = requests[i];
    plan.unplanned_bytes += align_up(r.bytes);
    const int src = r.in_place_of;
    if (src < 0 || static_cast<size_t>(src) >= n || taken[static_cast<size_t>(src)]) continue;
    const BufferRequest &s = requests[static_cast<size_t>(src)];
    if (s.bytes != r.bytes || s.last != r.first || s.first >= r.first) continue;
    taken[static_cast<size_t>(src)] = true;
    parent[i] = root_of(parent, src);
    ++plan.in_place;
  }
  struct Group {
    int64_t bytes = 0;
    int first = 0, last = 0;
    int64_t offset = 0;
  };
  std::vector<Group> groups(n);
  std::vector<bool> is_root(n, false);
  for (size_t i = 0; i < n; ++i) {
    const int root = root_of(parent, static_cast<int>(i));
    Group &g = groups[static_cast<size_t>(root)];
    const BufferRequest &r = requests[i];
    if (!is_root[static_cast<size_t>(root)]) {
      is_root[static_cast<size_t>(root)] = true;
      g.bytes = align_up(r.bytes);
      g.first = r.first;
      g.last = r.last;
    } else {
      g.bytes = std::max(g.bytes, align_up(r.bytes));
      g.first = std::min(g.first, r.first);
      g.last = std::max(g.last, r.last);
    }
  }
  std::vector<int> order;
  for (size_t i = 0; i < n; ++i) {
    if (is_root[i]) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return groups[static_cast<size_t>(a)].bytes > groups[static_cast<size_t>(b)].bytes;
  });
  std::vector<int> placed;
  for (int gi : order) {
    Group &g = groups[static_cast<size_t>(gi)];
    // The placed groups live at the same time, by offset; take the first gap that fits.
    std::vector<const Group *> live;
    for (int p : placed) {
      const Group &o = groups[static_cast<size_t>(p)];
      if (lifetimes_overlap(g.first, g.last, o.first, o.last)) live.push_back(&o);
    }
    std::sort(live.begin(), live.end(), [](const Group *a, const Group *b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (const Group *o : live) {
      if (offset + g.bytes <= o->offset) break;
      offset = std::max(offset, o->offset + o->bytes);
    }
    g.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + g.bytes);
    placed.push_back(gi);
  }
  for (size_t i = 0; i < n; ++i)
    plan.offsets[i] = groups[static_cast<size_t>(root_of(parent, static_cast<int>(i)))].offset;
  return plan;
}

std::string find_plan_conflict(const std::vector<BufferRequest> &requests, const MemoryPlan &plan) {
  if (plan.offsets.size() != requests.size())
    return concat("the plan has ", plan.offsets.size(), " offsets for ", requests.size(), " buffers");
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest &a = requests[i];
    if (plan.offsets[i] % kBufferAlignment != 0) return concat("buffer ", i, " is not aligned");
    if (plan.offsets[i] + a.bytes > plan.arena_bytes) return concat("buffer ", i, " ends past the arena");
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const BufferRequest &b = requests[j];
      if (!lifetimes_overlap(a.first, a.last, b.first, b.last) || a.bytes == 0 || b.bytes == 0) continue;
      const bool in_place = (b.in_place_of == static_cast<int>(i) && a.last == b.first) ||
                            (a.in_place_of == static_cast<int>(j) && b.last == a.first);
      if (in_place && plan.offsets[i] == plan.offsets[j]) continue;
      if (plan.offsets[i] < plan.offsets[j] + b.bytes && plan.offsets[j] < plan.offsets[i] + a.bytes)
        return concat("buffers ", i, " (steps ", a.first, "..", a.last, ", bytes ", plan.offsets[i], "+", a.bytes,
                      ") and ", j, " (steps ", b.first, "..", b.last, ", bytes ", plan.offsets[j], "+", b.bytes,
                      ") are live together and overlap");
    }
  }
  return "";
}

}  // namespace kiln::driver
