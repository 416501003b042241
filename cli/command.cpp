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

}  // namespace

int run(CLI::App &app, int argc, const char *const *argv, std::ostream &out, std::ostream &err) {
  try {
    app.parse(argc, argv);
    std::cout.flush();
    return kExitOk;
  } catch (const CLI::RuntimeError &e) {
    // A command that printed its failed result, or CLI11 ending the parse with a status.
    std::cout.flush();
    return e.get_exit_code();
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
