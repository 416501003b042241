#pragma once
// Fault-injection templates, to test a runner's measurement pool against candidates that crash,
// hang, exhaust memory, compute wrong answers or compile forever. They exist only in test builds:
// the test runner kiln-runner-test and the test executables that are their own measurement
// workers add them through a MeasureExtension (rpc_server/measure_extension.h); the production
// kiln-runner does not contain them. Each one is the elementwise
// sum out[i] = a[i] + b[i] of two float32 vectors of length "n" (canonical args {"n": n}), with a
// knob "tile" (the vector block) and a choice knob "fault" in {"off", "on"}. With "off" it is a
// correct kernel like any other; with "on" the extension's hooks inject the fault its name says,
// in the phase it names:
//   test.segfault       a real SIGSEGV while running;
//   test.abort          abort() while running;
//   test.infinite_loop  a loop that never ends while running;
//   test.huge_alloc     allocating and touching memory until the address-space limit refuses
//                       more, while running (std::bad_alloc);
//   test.wrong_answer   one output element changed after the warm-up call, before the check;
//   test.small_error    the same with a small error: the largest output element moved by 0.4 % of
//                       max(1, its magnitude), beyond float32's tolerance but within float16's;
//   test.slow_compile   sleeping beyond the build timeout while compiling.
#include "compiler/ops/registry.h"
#include "rpc_server/measure_extension.h"

namespace kiln::rpc {

// Adds the seven test.* templates. Throws ops::OpError if one is there already.
void add_test_templates(ops::Registry &registry);

// The extension that adds the test.* templates and injects their faults.
MeasureExtension test_templates_extension();

}  // namespace kiln::rpc
