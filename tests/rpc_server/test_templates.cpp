#include "test_templates.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "compiler/ir/op.h"
#include "compiler/ops/generic_schedule.h"

namespace kiln::rpc {

namespace {

using autotune::Config;
using autotune::ConfigSpace;
using contracts::Json;

enum class InjectedFault { Segfault, Abort, InfiniteLoop, HugeAlloc, WrongAnswer, SmallError, SlowCompile };

struct FaultTemplate {
  const char *name;
  InjectedFault fault;
  const char *summary;
};

const FaultTemplate kTemplates[] = {
    {"test.segfault", InjectedFault::Segfault, "fault injection: SIGSEGV while running"},
    {"test.abort", InjectedFault::Abort, "fault injection: abort() while running"},
    {"test.infinite_loop", InjectedFault::InfiniteLoop, "fault injection: a never-ending loop while running"},
    {"test.huge_alloc", InjectedFault::HugeAlloc, "fault injection: memory exhausted while running"},
    {"test.wrong_answer", InjectedFault::WrongAnswer, "fault injection: a wrong output element"},
    {"test.small_error", InjectedFault::SmallError, "fault injection: an output element off by 0.4 %"},
    {"test.slow_compile", InjectedFault::SlowCompile, "fault injection: compiling beyond the build timeout"},
};

constexpr int64_t kMaxLength = int64_t{1} << 28;

int64_t length_arg(const std::string &tmpl, const Json &args) {
  if (!args.is_object()) throw ops::OpError("workload " + tmpl + ": arguments must be a JSON object");
  for (const auto &[key, value] : args.as_object()) {
    (void)value;
    if (key != "n") throw ops::OpError("workload " + tmpl + ": unknown argument \"" + key + "\" (arguments: n)");
  }
  const Json *n = args.find("n");
  if (!n || !n->is_int()) throw ops::OpError("workload " + tmpl + ": \"n\" (the vector length) must be an integer");
  if (n->as_int() < 1 || n->as_int() > kMaxLength) {
    throw ops::OpError("workload " + tmpl + ": \"n\" must be in [1, " + std::to_string(kMaxLength) + "]");
  }
  return n->as_int();
}

ops::Template make_template(const FaultTemplate &f) {
  ops::Template t;
  t.name = f.name;
  t.version = 1;
  t.summary = f.summary;
  const std::string name = t.name;
  t.canonicalize = [name](const Json &a) { return Json::object({{"n", length_arg(name, a)}}); };
  t.flop = [name](const Json &a) { return static_cast<double>(length_arg(name, a)); };
  t.define_space = [name](ConfigSpace &s, const Json &a, const ops::Target &) {
    const int64_t n = length_arg(name, a);
    std::vector<std::vector<int64_t>> blocks;
    for (int64_t b : {4, 8, 16, 32}) {
      if (b <= n) blocks.push_back({b});
    }
    if (blocks.empty()) blocks.push_back({n});
    s.define_split("tile", n, 2, autotune::SplitPolicy::candidate(blocks));
    s.define_choice("fault", std::vector<std::string>{"off", "on"});
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const ops::Target &) {
    return s.from_values({{"fault", Json("off")}});
  };
  t.compute = [name](const Json &a, const Config &) {
    const int64_t n = length_arg(name, a);
    ops::Compute c;
    te::Tensor x = te::placeholder({ir::Expr(n)}, ir::Float(32), "a");
    te::Tensor y = te::placeholder({ir::Expr(n)}, ir::Float(32), "b");
    te::Tensor out = te::compute(
        {ir::Expr(n)}, [x, y](ir::Var i) { return x(i) + y(i); }, "out");
    c.inputs = {x, y};
    c.outputs = {out};
    c.parts["anchor"] = out;
    return c;
  };
  t.schedule = [](te::Schedule &s, const ops::Compute &c, const Config &cfg, const ops::Target &) {
    ops::schedule_injective(s, c.outputs[0], cfg.split("tile")[1]);
  };
  return t;
}

// The hooks of a config with fault=on: each injects its template's fault in its phase.
class FaultHooks final : public CandidateHooks {
 public:
  explicit FaultHooks(InjectedFault fault) : fault_(fault) {}

  // SlowCompile sleeps well beyond the build timeout.
  void before_compile(uint32_t build_timeout_ms) override {
    if (fault_ != InjectedFault::SlowCompile) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(uint64_t{build_timeout_ms} * 4 + 60000));
  }

  // Segfault, Abort and InfiniteLoop never return; HugeAlloc throws std::bad_alloc once the memory
  // it touched is freed again.
  void after_warmup_call() override {
    switch (fault_) {
      case InjectedFault::Segfault: {
        volatile int *volatile null_page = nullptr;
        *null_page = 1;
        raise(SIGSEGV);
        break;
      }
      case InjectedFault::Abort:
        std::abort();
      case InjectedFault::InfiniteLoop: {
        volatile uint64_t spins = 0;
        for (;;) spins = spins + 1;
      }
      case InjectedFault::HugeAlloc: {
        // Touched chunks, so that the memory is really taken, until the address-space limit makes
        // an allocation fail; the chunks are freed as the exception leaves this scope.
        constexpr size_t kChunk = size_t{64} << 20;
        std::vector<std::unique_ptr<char[]>> chunks;
        for (;;) {
          std::unique_ptr<char[]> chunk(new char[kChunk]);
          volatile char *page = chunk.get();
          for (size_t off = 0; off < kChunk; off += 4096) page[off] = 1;
          chunks.push_back(std::move(chunk));
        }
      }
      case InjectedFault::WrongAnswer:
      case InjectedFault::SmallError:
      case InjectedFault::SlowCompile:
        break;
    }
  }

  // WrongAnswer adds 1 to one element of the first output. SmallError moves its largest element
  // by 4e-3 times max(1, its magnitude): outside float32's tolerance (1e-4 * max(1, max|ref|) +
  // 1e-3 * |ref|, 1.1e-3 of it here), inside float16's (1e-2 + 1e-2 * |ref|).
  void inspect_outputs(std::vector<deploy::Tensor> &outputs) override {
    if (outputs.empty() || outputs[0].numel() == 0) return;
    float *out = outputs[0].data_as<float>();
    const int64_t n = outputs[0].numel();
    if (fault_ == InjectedFault::WrongAnswer) {
      out[n / 2] = out[n / 2] + 1.0f;
    } else if (fault_ == InjectedFault::SmallError) {
      int64_t largest = 0;
      for (int64_t i = 1; i < n; ++i) {
        if (std::fabs(out[i]) > std::fabs(out[largest])) largest = i;
      }
      out[largest] += 4e-3f * std::max(1.0f, std::fabs(out[largest]));
    }
  }

 private:
  InjectedFault fault_;
};

}  // namespace

void add_test_templates(ops::Registry &registry) {
  for (const auto &f : kTemplates) registry.add(make_template(f));
}

MeasureExtension test_templates_extension() {
  MeasureExtension extension;
  extension.add_templates = add_test_templates;
  extension.hooks = [](const std::string &template_name, const Config &cfg) -> std::unique_ptr<CandidateHooks> {
    for (const auto &f : kTemplates) {
      if (template_name == f.name && cfg.choice_string("fault") == "on") return std::make_unique<FaultHooks>(f.fault);
    }
    return nullptr;
  };
  return extension;
}

}  // namespace kiln::rpc
