#pragma once
// Fault-injection templates, to test a runner's measurement pool against candidates that crash,
// hang, exhaust memory, compute wrong answers or compile forever. Each one is the elementwise
// sum out[i] = a[i] + b[i] of two float32 vectors of length "n" (canonical args {"n": n}), with a
// knob "tile" (the vector block) and a choice knob "fault" in {"off", "on"}. With "off" it is a
// correct kernel like any other; with "on" the measurement worker injects the fault its name
// says, in the phase it names:
//   test.segfault       a real SIGSEGV while running;
//   test.abort          abort() while running;
//   test.infinite_loop  a loop that never ends while running;
//   test.huge_alloc     allocating and touching memory until the address-space limit refuses
//                       more, while running (std::bad_alloc);
//   test.wrong_answer   one output element changed after the warm-up call, before the check;
//   test.slow_compile   sleeping beyond the build timeout while compiling.
// A worker knows these templates only when the runner enables them.
#include <cstdint>
#include <string>

#include "compiler/autotune/config_space.h"
#include "compiler/ops/registry.h"
#include "deploy/tensor.h"

namespace kiln::rpc {

enum class InjectedFault { None, Segfault, Abort, InfiniteLoop, HugeAlloc, WrongAnswer, SlowCompile };

// Adds the six test.* templates. Throws ops::OpError if one is there already.
void add_test_templates(ops::Registry &registry);

// The fault a config of `template_name` asks for: None for every other template and for fault=off.
InjectedFault injected_fault(const std::string &template_name, const autotune::Config &cfg);

// Faults of the build phase: sleeps well beyond `build_timeout_ms` (SlowCompile); nothing for
// the others.
void inject_build_fault(InjectedFault fault, uint32_t build_timeout_ms);
// Faults of the running kernel: Segfault, Abort and InfiniteLoop never return, HugeAlloc throws
// std::bad_alloc once the memory it touched is freed again; nothing for the others.
void inject_run_fault(InjectedFault fault);
// WrongAnswer: changes one element of `output`; nothing for the others.
void inject_output_fault(InjectedFault fault, deploy::Tensor &output);

}  // namespace kiln::rpc
