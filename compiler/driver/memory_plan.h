#pragma once
// Static memory planning: every tensor a compiled graph writes gets a byte offset in one arena,
// chosen so that tensors live at the same time never share bytes. Lifetimes are intervals of step
// indices; a tensor is live from the step that writes it to the last step that reads it
// (inclusive), so a step's output never shares bytes with its inputs, except where the request
// says the step may write in place over one input that dies at it.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::driver {

// Every buffer starts at a multiple of this many bytes (the C ABI's alignment of tensor data).
inline constexpr int64_t kBufferAlignment = 64;

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // the (first) step that writes it (inputs: 0)
  int last = 0;   // the last step that reads it (inclusive); outputs and inputs: the last step
  // Another request (an index into the list) whose bytes this one may take over: it is read for
  // the last time by the step that writes this one, elementwise at the same element index, and has
  // the same size, and is written by an earlier step. -1: none.
  int in_place_of = -1;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arena_bytes = 0;       // the arena: the planned peak
  int64_t unplanned_bytes = 0;   // the sum of all requests (each aligned): no reuse at all
  int in_place = 0;              // requests that took over their in_place_of buffer
};

// Places the requests greedily, largest first, each at the lowest aligned offset free of every
// placed request whose lifetime overlaps its own.
MemoryPlan plan_memory(const std::vector<BufferRequest> &requests);

// The first pair of requests live at the same time whose bytes overlap in `plan` (an in-place
// pair excepted) as a message, or "" when there is none. For tests and a check after planning.
std::string find_plan_conflict(const std::vector<BufferRequest> &requests, const MemoryPlan &plan);

}  // namespace kiln::driver
