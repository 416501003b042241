#include "compiler/ops/registry.h"

#include <cctype>

#include "contracts/workload.h"
#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

std::vector<te::Tensor> Compute::args() const {
  std::vector<te::Tensor> a = inputs;
  a.insert(a.end(), outputs.begin(), outputs.end());
  return a;
}

const te::Tensor &Compute::part(const std::string &role) const {
  auto it = parts.find(role);
  KILN_CHECK(it != parts.end(), "compute has no part '", role, "'");
  return it->second;
}

const Registry &Registry::builtin() {
  static const Registry r = [] {
    Registry reg;
    register_gemm_templates(reg);
    register_conv2d_templates(reg);
    register_fused_conv_templates(reg);
    register_pool_templates(reg);
    register_norm_templates(reg);
    register_injective_templates(reg);
    register_layout_templates(reg);
    register_cuda_templates(reg);
    register_vta_templates(reg);
    return reg;
  }();
  return r;
}

void Registry::add(Template t) {
  if (t.name.empty()) throw OpError("a template needs a name");
  if (!t.canonicalize || !t.flop || !t.define_space || !t.default_config || !t.compute || !t.schedule) {
    throw OpError("template " + t.name + " is missing one of its functions");
  }
  if (templates_.count(t.name)) throw OpError("template " + t.name + " is registered twice");
  std::string name = t.name;
  templates_.emplace(name, std::make_shared<const Template>(std::move(t)));
}

bool Registry::contains(const std::string &name) const { return templates_.count(name) != 0; }

std::shared_ptr<const Template> Registry::get(const std::string &name) const {
  auto it = templates_.find(name);
  if (it == templates_.end()) {
    std::string known;
    for (const auto &[n, t] : templates_) known += (known.empty() ? "" : ", ") + n;
    throw OpError("unknown operator template '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> r;
  for (const auto &[n, t] : templates_) r.push_back(n);
  return r;
}

contracts::Workload Registry::workload(const std::string &name, const contracts::Json &args) const {
  auto t = get(name);
  contracts::Json canonical;
  try {
    canonical = t->canonicalize(args);
  } catch (const contracts::JsonError &e) {
    throw OpError("workload " + name + ": " + e.what());
  }
  return contracts::Workload::make(name, std::move(canonical));
}

namespace {

autotune::ConfigSpace make_space(const Template &t, const contracts::Json &args, const Target &target) {
  autotune::ConfigSpace space(t.name, t.version);
  t.define_space(space, args, target);
  return space;
}

// Throws OpError when a tensor of `c` is beyond kMaxTensorElements.
void check_tensor_sizes(const std::string &template_name, const Compute &c) {
  std::vector<te::Tensor> tensors = c.args();
  for (const auto &[role, t] : c.parts) tensors.push_back(t);
  tensors.insert(tensors.end(), c.epilogue.begin(), c.epilogue.end());
  for (const te::Tensor &t : tensors) {
    int64_t elements = 1;
    bool overflow = false;
    std::string shape;
    for (const ir::Expr &d : t.shape()) {
      const auto extent = ir::as_const_int(d);
      if (!extent) return;  // a symbolic shape: checked where it is bound
      shape += (shape.empty() ? "" : ", ") + std::to_string(*extent);
      overflow = overflow || __builtin_mul_overflow(elements, *extent, &elements);
    }
    if (overflow || elements > kMaxTensorElements) {
      throw OpError("workload " + template_name + ": tensor \"" + t.name() + "\" would have " +
                    (overflow ? std::string("more than 2^63") : std::to_string(elements)) + " elements (shape [" +
                    shape + "]); a tensor may have at most " + std::to_string(kMaxTensorElements) +
                    " (2^31 - 1: tensors are indexed with 32-bit integers)");
    }
  }
}

}  // namespace

Task::Task(const std::string &template_name, const contracts::Json &args, const Target &target,
           const Registry &registry)
    : template_(registry.get(template_name)),
      workload_(registry.workload(template_name, args)),
      target_(target),
      flop_(template_->flop(workload_.args)),
      space_(make_space(*template_, workload_.args, target_)) {
  // Outputs and intermediate stages may be larger than the inputs the arguments checked.
  check_tensor_sizes(template_->name, template_->compute(workload_.args, default_config()));
}

autotune::Config Task::default_config() const {
  autotune::Config c = template_->default_config(space_, workload_.args, target_);
  space_.check(c);
  return c;
}

Compute Task::compute(const autotune::Config &cfg) const {
  space_.check(cfg);
  return template_->compute(workload_.args, cfg);
}

Instance Task::instantiate(const autotune::Config &cfg) const {
  Instance inst;
  inst.compute = compute(cfg);
  inst.schedule = te::create_schedule(inst.compute.outputs);
  template_->schedule(*inst.schedule, inst.compute, cfg, target_);
  return inst;
}

ir::LoweredFunc Task::lower(const autotune::Config &cfg, const std::string &name) const {
  if (target_.target.kind() == "vta") return lower(cfg, name, codegen::vta::vta_lower_options());
  return lower(cfg, name, lower::LowerOptions::from_env());
}

ir::LoweredFunc Task::lower(const autotune::Config &cfg, const std::string &name,
                            const lower::LowerOptions &options) const {
  std::string fn = name;
  if (fn.empty()) {
    for (char c : template_->name) fn.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  }
  Instance inst = instantiate(cfg);
  return lower::lower(*inst.schedule, inst.compute.args(), fn, options);
}

}  // namespace kiln::ops
