#include "compiler/ops/tuning_task.h"

namespace kiln::ops {

namespace {

const char *const kBlockArgs[] = {"ic_bn", "oc_bn", "c_bn", "bn"};

// `kernel` without its epilogue where that leaves the config space as it is; otherwise `kernel`.
Task anchor_task(const Task &kernel) {
  const contracts::Json &args = kernel.workload().args;
  const contracts::Json *epilogue = args.is_object() ? args.find("epilogue") : nullptr;
  if (!epilogue || !epilogue->is_array() || epilogue->size() == 0) return kernel;
  contracts::Json anchor = args;
  anchor.set("epilogue", contracts::Json::array());
  Task task(kernel.workload().template_name, anchor, kernel.target());
  if (task.space().fingerprint() != kernel.space().fingerprint()) return kernel;
  return task;
}

// Config `f` of a free-block task in the space of `kernel` (the same knobs, the blocks restricted to
// the fixed ones); nullopt when its blocks are others.
std::optional<autotune::Config> with_fixed_blocks(const Task &kernel, const autotune::Config &f) {
  try {
    std::vector<std::pair<std::string, contracts::Json>> values;
    for (const autotune::Knob &k : kernel.space().knobs()) {
      if (!f.has(k.name)) return std::nullopt;
      values.emplace_back(k.name, f.value(k.name));
    }
    return kernel.space().from_values(values);
  } catch (const UserError &) {
    return std::nullopt;
  }
}

}  // namespace

bool free_blocks_when_tuned(const Task &kernel) {
  const std::string &t = kernel.workload().template_name;
  return t == "conv2d_nchwc.x86" || t == "depthwise_conv2d_nchwc.x86";
}

Task tuning_task(const Task &kernel) {
  return anchor_task(free_blocks_when_tuned(kernel) ? without_fixed_blocks(kernel) : kernel);
}

Task without_fixed_blocks(const Task &kernel) {
  const contracts::Json &args = kernel.workload().args;
  if (!args.is_object()) return kernel;
  contracts::Json free = contracts::Json::object();
  bool fixed = false;
  for (const auto &[k, v] : args.as_object()) {
    bool block = false;
    for (const char *b : kBlockArgs) block = block || k == b;
    if (block) {
      fixed = true;
    } else {
      free.set(k, v);
    }
  }
  if (!fixed) return kernel;
  return Task(kernel.workload().template_name, free, kernel.target());
}

TunedChoice choose_tuned_config(const ConfigLookup *configs, const Task &kernel) {
  TunedChoice c;
  if (!configs) return c;
  const std::string target = kernel.target().str();
  const int64_t default_index = kernel.default_config().index();
  // The record of the kernel's default config, where the log has one (either workload below).
  std::optional<TunedConfig> default_record;
  auto note_default = [&](const TunedConfig &t, const autotune::Config &cfg) {
    if (cfg.index() == default_index && (!default_record || t.mean_s < default_record->mean_s)) default_record = t;
  };
  // The records of the kernel's own workload (its blocks fixed as they are): the fastest one.
  for (const TunedConfig &own : configs->top(anchor_task(kernel).workload(), target, kBlockCandidates)) {
    std::optional<autotune::Config> cfg;
    std::string stale;
    try {
      cfg = kernel.space().from_record(own.config);
    } catch (const UserError &e) {
      stale = e.what();
    }
    if (!c.found) {
      c.found = true;
      c.exact_target = own.exact_target;
      c.record = own;
      c.config = cfg;
      c.stale = stale;
    }
    if (cfg) note_default(own, *cfg);
  }
  // The fastest record of the free-block task whose blocks are the fixed ones, where it is faster.
  // The record of the free-block task's default config (the template's own blocks) is kept aside.
  std::optional<TunedConfig> free_default_record;
  const Task free = without_fixed_blocks(kernel);
  if (free.key() != kernel.key()) {
    const Task free_task = anchor_task(free);
    const int64_t free_default = free_task.default_config().index();
    bool first = true;
    for (const TunedConfig &t : configs->top(free_task.workload(), target, kBlockCandidates)) {
      autotune::Config f;
      try {
        f = free_task.space().from_record(t.config);
      } catch (const UserError &) {
        continue;  // a record of another version of the space
      }
      if (f.index() == free_default && (!free_default_record || t.mean_s < free_default_record->mean_s))
        free_default_record = t;
      std::optional<autotune::Config> cfg = with_fixed_blocks(kernel, f);
      if (!cfg) continue;
      note_default(t, *cfg);
      if (first && (!c.config || t.mean_s < c.record->mean_s)) {
        c.found = true;
        c.exact_target = t.exact_target;
        c.record = t;
        c.config = std::move(cfg);
        c.stale.clear();
      }
      first = false;
    }
  }
  // Blocks no record has (the layout pass kept them, the default's record standing for them, as
  // the log had no record of them): the default config, with the free-block default's record.
  if (!c.found && free_default_record) {
    c.found = true;
    c.exact_target = free_default_record->exact_target;
    c.record = free_default_record;
    c.config = kernel.default_config();
    c.default_kept = true;
    return c;
  }
  // A tuned config within kTieMargin of the default's own record is a tie: the default is kept,
  // with its record.
  if (c.config && default_record && c.config->index() != default_index &&
      !clearly_faster(c.record->mean_s, default_record->mean_s)) {
    c.exact_target = default_record->exact_target;
    c.record = default_record;
    c.config = kernel.default_config();
    c.default_kept = true;
  }
  return c;
}

bool clearly_faster(double tuned_s, double default_s) { return tuned_s * (1 + kTieMargin) < default_s; }

}  // namespace kiln::ops
