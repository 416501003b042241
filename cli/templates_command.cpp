#include "cli/templates_command.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/table.h"
#include "compiler/driver/target.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "contracts/error.h"
#include "contracts/json.h"

namespace kiln::cli {

namespace {

using nlohmann::ordered_json;

struct TemplatesOptions {
  bool json = false;
  std::string name;
  std::string args;
  std::string target = "llvm -mcpu=native";
};

ordered_json argument_json(const ops::ArgumentSpec &a) {
  ordered_json j;
  j["name"] = a.name;
  j["type"] = a.type;
  j["required"] = a.required();
  j["default"] = a.required() ? ordered_json() : ordered_json(a.default_value);
  j["description"] = a.description;
  return j;
}

ordered_json template_json(const ops::Template &t) {
  ordered_json j;
  j["name"] = t.name;
  j["version"] = t.version;
  j["summary"] = t.summary;
  ordered_json args = ordered_json::array();
  for (const auto &a : t.arguments) args.push_back(argument_json(a));
  j["arguments"] = std::move(args);
  j["example"] = ordered_json::parse(t.example.dump());
  return j;
}

// "data, weight [out_dtype, epilogue, prepacked]": required arguments, then the optional ones.
std::string argument_list(const ops::Template &t) {
  std::string required, optional;
  for (const auto &a : t.arguments) {
    std::string &list = a.required() ? required : optional;
    list += (list.empty() ? "" : ", ") + a.name;
  }
  if (optional.empty()) return required;
  return required + (required.empty() ? "[" : " [") + optional + "]";
}

void list_command(const TemplatesOptions &options) {
  const ops::Registry &registry = ops::Registry::builtin();
  if (options.json) {
    ordered_json out = ordered_json::array();
    for (const std::string &name : registry.names()) out.push_back(template_json(*registry.get(name)));
    std::cout << out.dump(2) << '\n';
    return;
  }
  Table table({"TEMPLATE", "DESCRIPTION", "ARGUMENTS [optional]"});
  for (const std::string &name : registry.names()) {
    const ops::Template &t = *registry.get(name);
    table.add_row({t.name, t.summary, argument_list(t)});
  }
  table.print(std::cout);
  std::cout << "\n`kiln templates show TEMPLATE` gives a template's arguments, config space and default config.\n";
}

// "tile_y=[4,2,8];tile_x=[16,8]": a config in the form --config takes.
std::string config_text(const autotune::Config &c) {
  std::string text = c.to_string();
  for (char &ch : text) {
    if (ch == ' ') ch = ';';
  }
  return text;
}

std::string knob_values(const autotune::Knob &k) {
  constexpr size_t kShown = 6;
  std::string text;
  for (size_t i = 0; i < k.entities.size() && i < kShown; ++i) text += (i ? " " : "") + k.entities[i].dump();
  if (k.entities.size() > kShown) text += " ...";
  return text;
}

void show_command(const TemplatesOptions &options) {
  const ops::Registry &registry = ops::Registry::builtin();
  std::shared_ptr<const ops::Template> t = registry.get(options.name);
  contracts::Json args = t->example;
  if (!options.args.empty()) {
    try {
      args = contracts::Json::parse(options.args);
    } catch (const contracts::JsonError &e) {
      throw UserError("--args is not JSON: " + std::string(e.what()));
    }
  }
  ops::Task task(t->name, args, driver::resolve_target(options.target), registry);
  const autotune::ConfigSpace &space = task.space();
  const autotune::Config config = task.default_config();
  const bool fused = std::any_of(t->arguments.begin(), t->arguments.end(),
                                 [](const ops::ArgumentSpec &a) { return a.name == "epilogue"; });

  if (options.json) {
    ordered_json j = template_json(*t);
    j["workload"] = {{"args", ordered_json::parse(task.workload().args_json)},
                     {"key", task.key()},
                     {"from_example", options.args.empty()}};
    j["target"] = task.target().str();
    if (fused) {
      ordered_json formats = ordered_json::array();
      for (const auto &f : ops::epilogue_formats()) {
        formats.push_back({{"descriptor", ordered_json::parse(f.descriptor)}, {"meaning", f.meaning}});
      }
      j["epilogue_format"] = std::move(formats);
    }
    ordered_json knobs = ordered_json::array();
    for (const auto &k : space.knobs()) {
      ordered_json values = ordered_json::array();
      for (const auto &v : k.entities) values.push_back(ordered_json::parse(v.dump()));
      knobs.push_back({{"name", k.name},
                       {"kind", autotune::knob_kind_name(k.kind)},
                       {"size", k.size()},
                       {"description", k.description},
                       {"values", std::move(values)}});
    }
    j["space"] = {{"fingerprint", space.fingerprint()}, {"size", space.size()}, {"knobs", std::move(knobs)}};
    j["default_config"] = ordered_json::parse(config.to_json());
    std::cout << j.dump(2) << '\n';
    return;
  }

  std::cout << t->name << " (version " << t->version << "): " << t->summary << "\n\nArguments:\n";
  Table arguments({"NAME", "TYPE", "DEFAULT", "DESCRIPTION"});
  for (const auto &a : t->arguments) {
    arguments.add_row({a.name, a.type, a.required() ? "required" : a.default_value, a.description});
  }
  arguments.print(std::cout);
  if (fused) {
    std::cout << "\nEpilogue format: a JSON list of ops applied in order to the output, e.g. "
                 "[{\"op\":\"bias_add\"},{\"op\":\"relu\"}]\n";
    Table formats({"OP", "MEANING"});
    for (const auto &f : ops::epilogue_formats()) formats.add_row({f.descriptor, f.meaning});
    formats.print(std::cout);
  }
  std::cout << "\nWorkload" << (options.args.empty() ? " (the example; --args gives your own)" : "") << ":\n";
  print_fields(std::cout, {{"args", task.workload().args_json}, {"key", task.key()}, {"target", task.target().str()}});
  std::cout << "\nConfig space: " << space.size() << " configs"
            << (space.has_constraints() ? " before constraints" : "") << ", fingerprint "
            << space.fingerprint().substr(0, 16) << "\n";
  Table knobs({"KNOB", "KIND", "VALUES", "FIRST VALUES", "DEFINITION"});
  for (const auto &k : space.knobs()) {
    knobs.add_row({k.name, autotune::knob_kind_name(k.kind), std::to_string(k.size()), knob_values(k), k.description});
  }
  knobs.print(std::cout);
  std::cout << "\nDefault config (index " << config.index() << "):\n  " << config_text(config)
            << "\n\nkiln measure --config takes this form; knobs left out keep their default value.\n";
}

}  // namespace

void add_templates_command(CLI::App &app) {
  auto options = std::make_shared<TemplatesOptions>();
  CLI::App *templates = app.add_subcommand("templates", "List the operator templates and their arguments.");
  templates->fallthrough();  // --json is accepted after `show` too
  templates->add_flag("--json", options->json, "machine-readable JSON output");
  templates->callback([options, templates] {
    if (templates->get_subcommands().empty()) list_command(*options);
  });
  CLI::App *show =
      templates->add_subcommand("show", "One template: arguments, epilogue format, config space and default config.");
  show->add_option("template", options->name, "the template, e.g. dense_pack.x86")->required();
  show->add_option("--args", options->args, "the workload's arguments as JSON (default: the template's example)");
  show->add_option("--target", options->target, "the target the config space is for")->capture_default_str();
  show->callback([options] { show_command(*options); });
}

}  // namespace kiln::cli
