#include "cli/command.h"

#include <exception>
#include <string>

#include "contracts/error.h"

namespace kiln::cli {

namespace {

// "kiln db best": the app's name and the subcommands parsed, down to the one that ran.
std::string command_name(const CLI::App &app) {
  std::string name = app.get_name();
  const CLI::App *at = &app;
  for (std::vector<CLI::App *> parsed = at->get_subcommands(); !parsed.empty(); parsed = at->get_subcommands()) {
    at = parsed.front();
    name += " " + at->get_name();
  }
  return name;
}

// The commands an app offers, by name.
std::string command_list(const CLI::App &app) {
  std::string list;
  for (const CLI::App *sub : app.get_subcommands([](const CLI::App *) { return true; })) {
    list += (list.empty() ? "" : ", ") + sub->get_name();
  }
  return list;
}

// When the parse stopped at a command group without a command (`kiln db`, `kiln db no-such`),
// says so with the commands the group has, and returns true.
bool report_missing_command(const CLI::App &app, std::ostream &err) {
  const CLI::App *at = &app;
  for (std::vector<CLI::App *> parsed = at->get_subcommands(); !parsed.empty(); parsed = at->get_subcommands()) {
    at = parsed.front();
  }
  if (at->get_require_subcommand_min() == 0 || !at->get_subcommands().empty()) return false;
  const std::vector<std::string> remaining = app.remaining(true);
  const std::string name = command_name(app);
  if (!remaining.empty() && !remaining.front().empty() && remaining.front()[0] == '-') return false;
  if (remaining.empty()) {
    err << name << ": a command is required\n";
  } else {
    err << name << ": unknown command '" << remaining.front() << "'\n";
  }
  err << "commands of " << name << ": " << command_list(*at) << "\n"
      << "Run '" << name << " --help' for more information.\n";
  return true;
}

// "kiln db" for the app `db` of `kiln`.
std::string full_name(const CLI::App &app) {
  std::string name = app.get_name();
  for (const CLI::App *p = app.get_parent(); p != nullptr; p = p->get_parent()) name = p->get_name() + " " + name;
  return name;
}

// The options of `group` a command under it inherits, as help lines; "" when there are none.
std::string inherited_options_text(const CLI::App &group, const CLI::App &command) {
  std::vector<const CLI::Option *> options = group.get_options([&](const CLI::Option *o) {
    return o != group.get_help_ptr() && o != group.get_help_all_ptr() && o != group.get_version_ptr() &&
           !o->get_lnames().empty();
  });
  if (options.empty()) return "";
  std::string text = "Options of " + full_name(group) + ", given before " + command.get_name() +
                     (group.get_fallthrough() ? " or after it" : "") + ":\n";
  for (const CLI::Option *o : options) {
    std::string line = "  " + o->get_name(false, true);
    if (o->get_type_size() != 0 && !o->get_type_name().empty()) line += " " + o->get_type_name();
    if (!o->get_default_str().empty()) line += "=" + o->get_default_str();
    if (line.size() < 30) line.resize(30, ' ');
    text += line + "  " + o->get_description() + "\n";
  }
  return text;
}

}  // namespace

void show_inherited_options(CLI::App &app) {
  for (CLI::App *command : app.get_subcommands([](CLI::App *) { return true; })) {
    std::string text;
    for (const CLI::App *group = &app; group != nullptr; group = group->get_parent()) {
      const std::string own = inherited_options_text(*group, *command);
      if (!own.empty()) text = own + (text.empty() ? "" : "\n" + text);
    }
    if (!text.empty()) command->footer([text] { return text; });
    show_inherited_options(*command);
  }
}

int run(CLI::App &app, int argc, const char *const *argv, std::ostream &out, std::ostream &err) {
  try {
    app.parse(argc, argv);
    std::cout.flush();
    return kExitOk;
  } catch (const CLI::RuntimeError &e) {
    // A command that printed its failed result, or CLI11 ending the parse with a status.
    std::cout.flush();
    return e.get_exit_code();
  } catch (const CLI::RequiredError &e) {
    if (report_missing_command(app, err)) return kExitUsage;
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError &e) {
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  } catch (const UserError &e) {
    std::cout.flush();
    err << command_name(app) << ": error: " << e.what() << '\n';
    return kExitFailed;
  } catch (const std::exception &e) {
    std::cout.flush();
    err << command_name(app) << ": internal error: " << e.what() << '\n';
    return kExitInternal;
  } catch (...) {
    std::cout.flush();
    err << command_name(app) << ": internal error: an exception that is not a std::exception\n";
    return kExitInternal;
  }
}

}  // namespace kiln::cli
