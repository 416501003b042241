#pragma once
// The operator library's workload registry. A template (e.g. "conv2d_nchwc.x86") turns canonical
// arguments (shapes, dtypes, layout, attributes, as JSON) into
//   - the compute: te tensors, inputs then outputs (internal stages may depend on the config,
//     for example the block sizes of a packed layout);
//   - the FLOP count;
//   - the config space for a target;
//   - the schedule for a config;
//   - a default config chosen by heuristics (what a build without tuning uses).
// A workload is a template name plus its canonical arguments (contracts/workload.h): its key is the
// one the tuning log, the runners and the tuner use.
//
// The registry is an explicit object: Registry::builtin() holds every template of this library,
// and callers may build their own.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "contracts/json.h"
#include "contracts/workload.h"
#include "compiler/ir/function.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/target.h"
#include "compiler/te/schedule.h"

namespace kiln::ops {

// Bad workload arguments or an unknown template.
class OpError : public UserError {
 public:
  using UserError::UserError;
};

// Limits of a workload's tensors. A dimension has at most kMaxDimension elements, and a tensor
// (an input, an output or an intermediate stage) at most kMaxTensorElements, since the generated
// code indexes tensors with 32-bit integers. A workload beyond them is an OpError naming the tensor
// and the limit.
constexpr int64_t kMaxDimension = int64_t{1} << 30;
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

// The tensors of one instance of a template.
struct Compute {
  std::vector<te::Tensor> inputs;
  std::vector<te::Tensor> outputs;
  // Stages the schedule refers to by role: "anchor" (the main computation), "pad", "pack", ...
  std::map<std::string, te::Tensor> parts;
  // The epilogue stages in order; when there are any, the last one is outputs[0].
  std::vector<te::Tensor> epilogue;
  // Integer facts the schedule needs that the tensors do not show (e.g. the softmax axis).
  std::map<std::string, int64_t> attrs;

  // Inputs then outputs: the argument list of the lowered function.
  std::vector<te::Tensor> args() const;
  bool has_part(const std::string &role) const { return parts.count(role) != 0; }
  const te::Tensor &part(const std::string &role) const;
};

// One argument of a template as a user writes it, for listings and help (`kiln templates`).
struct ArgumentSpec {
  std::string name;
  // "tensor, rank 4", "int", "[int, int]", "bool", "dtype", "epilogue", "\"max\" | \"avg\"", ...
  std::string type;
  // What an absent argument means; empty when the argument is required.
  std::string default_value;
  std::string description;

  bool required() const { return default_value.empty(); }
};

struct Template {
  std::string name;
  int version = 1;
  std::string summary;  // one line for listings
  // Every argument canonicalize accepts, in the order a listing shows them.
  std::vector<ArgumentSpec> arguments;
  // The arguments of a small workload, for help and tests.
  contracts::Json example;
  // Validates the arguments and returns their canonical form (defaults filled in, numbers in one
  // spelling). Throws OpError naming what is wrong.
  std::function<contracts::Json(const contracts::Json &args)> canonicalize;
  std::function<double(const contracts::Json &args)> flop;
  std::function<void(autotune::ConfigSpace &space, const contracts::Json &args, const Target &target)> define_space;
  std::function<autotune::Config(const autotune::ConfigSpace &space, const contracts::Json &args, const Target &target)>
      default_config;
  std::function<Compute(const contracts::Json &args, const autotune::Config &cfg)> compute;
  std::function<void(te::Schedule &s, const Compute &c, const autotune::Config &cfg, const Target &target)> schedule;
};

class Registry {
 public:
  // Every template of the operator library.
  static const Registry &builtin();

  // Throws OpError for a template without a name or function, or a name given twice.
  void add(Template t);
  bool contains(const std::string &name) const;
  // Throws OpError naming the known templates.
  std::shared_ptr<const Template> get(const std::string &name) const;
  std::vector<std::string> names() const;
  // The workload with canonical arguments.
  contracts::Workload workload(const std::string &name, const contracts::Json &args) const;

 private:
  std::map<std::string, std::shared_ptr<const Template>> templates_;
};

// A schedule made for a config, with the tensors it schedules.
struct Instance {
  Compute compute;
  std::unique_ptr<te::Schedule> schedule;
};

// A workload on a target: what the tuner measures and the compiler builds.
class Task {
 public:
  Task(const std::string &template_name, const contracts::Json &args, const Target &target,
       const Registry &registry = Registry::builtin());

  const contracts::Workload &workload() const { return workload_; }
  const std::string &key() const { return workload_.key; }
  const Target &target() const { return target_; }
  const Template &templ() const { return *template_; }
  double flop() const { return flop_; }
  const autotune::ConfigSpace &space() const { return space_; }
  autotune::Config default_config() const;
  autotune::Config parse_config(std::string_view json) const { return space_.parse_config(json); }

  // The compute for a config (its inputs and outputs have the same shapes for every config unless
  // the template's layout is itself a knob, as in conv2d_nchwc).
  Compute compute(const autotune::Config &cfg) const;
  // Compute and schedule. Throws ConfigError for a config of another space (a stale record) and
  // ScheduleError for a config the schedule cannot apply.
  Instance instantiate(const autotune::Config &cfg) const;
  // instantiate() then lower(); `name` defaults to the template name made a C identifier.
  ir::LoweredFunc lower(const autotune::Config &cfg, const std::string &name = "") const;
  // The same with explicit lowering options (the cost model lowers without unrolling or
  // vectorizing, so that the loop nest keeps its annotations).
  ir::LoweredFunc lower(const autotune::Config &cfg, const std::string &name, const lower::LowerOptions &options) const;

 private:
  std::shared_ptr<const Template> template_;
  contracts::Workload workload_;
  Target target_;
  double flop_ = 0;
  autotune::ConfigSpace space_;
};

}  // namespace kiln::ops
