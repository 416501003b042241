// The kiln tool's one error policy: a user error is its message and exit status 1, an internal
// error or any other exception is "internal error" and exit status 2, a wrong command line is
// exit status 2, and a command that ends with its own status keeps it. Commands here are stand-ins
// that throw what a real command may throw.
#include "cli/command.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "contracts/error.h"

namespace kiln::cli {
namespace {

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs `kiln <args>` on an app whose command `group leaf` runs `body`; `group` has the options
// --db and --json, also accepted after `leaf`, and a second command `other`.
Outcome run_kiln(const std::vector<std::string> &args, const std::function<void()> &body) {
  CLI::App app{"test app", "kiln"};
  app.require_subcommand(1);
  CLI::App *group = app.add_subcommand("group", "a command group");
  group->require_subcommand(1);
  group->fallthrough();
  std::string db = "./kiln.db";
  bool json = false;
  group->add_option("--db", db, "tuning-log file")->capture_default_str();
  group->add_flag("--json", json, "machine-readable JSON output");
  CLI::App *leaf = group->add_subcommand("leaf", "a command");
  int number = 0;
  leaf->add_option("--number", number, "a number");
  leaf->callback(body);
  group->add_subcommand("other", "another command");
  app.add_subcommand("single", "a command of its own");
  show_inherited_options(app);

  std::vector<const char *> argv = {"kiln"};
  for (const std::string &a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Outcome outcome;
  outcome.status = run(app, static_cast<int>(argv.size()), argv.data(), out, err);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

TEST(CommandTest, SuccessIsExitStatusZeroAndNoErrorLine) {
  bool ran = false;
  Outcome o = run_kiln({"group", "leaf"}, [&] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.err, "");
}

TEST(CommandTest, AUserErrorIsItsMessageAndExitStatusOne) {
  Outcome o = run_kiln({"group", "leaf"}, [] { throw UserError("no tuning log at ./kiln.db"); });
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "kiln group leaf: error: no tuning log at ./kiln.db\n");
}

TEST(CommandTest, ADerivedUserErrorIsAUserError) {
  struct NotFound : UserError {
    using UserError::UserError;
  };
  Outcome o = run_kiln({"group", "leaf"}, [] { throw NotFound("unknown workload \"ffff\""); });
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "kiln group leaf: error: unknown workload \"ffff\"\n");
}

TEST(CommandTest, AnInternalErrorIsExitStatusTwo) {
  Outcome o = run_kiln({"group", "leaf"}, [] { KILN_CHECK(1 + 1 == 3, "arithmetic"); });
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("kiln group leaf: internal error: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("check failed: 1 + 1 == 3: arithmetic"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find(": error:"), std::string::npos) << o.err;
}

TEST(CommandTest, AnyOtherExceptionIsAnInternalError) {
  Outcome o = run_kiln({"group", "leaf"}, [] { throw std::out_of_range("vector::at"); });
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err, "kiln group leaf: internal error: vector::at\n");
  o = run_kiln({"group", "leaf"}, [] { throw 42; });
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("kiln group leaf: internal error: ", 0), 0u) << o.err;
}

TEST(CommandTest, ACommandMayEndWithItsOwnStatusAndNoErrorLine) {
  Outcome o = run_kiln({"group", "leaf"}, [] { throw CLI::RuntimeError(kExitFailed); });
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "");
}

TEST(CommandTest, AWrongCommandLineIsExitStatusTwoAndHelpIsZero) {
  bool ran = false;
  Outcome o = run_kiln({"group", "leaf", "--number", "many"}, [&] { ran = true; });
  EXPECT_EQ(o.status, 2);
  EXPECT_FALSE(ran);
  EXPECT_NE(o.err.find("--number"), std::string::npos) << o.err;
  EXPECT_EQ(run_kiln({"group", "no-such-command"}, [] {}).status, 2);
  o = run_kiln({"group", "leaf", "--help"}, [] {});
  EXPECT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("--number"), std::string::npos) << o.out;
}

TEST(CommandTest, AnUnknownOrMissingCommandIsNamedWithTheCommandsThereAre) {
  Outcome o = run_kiln({"group", "no-such-command"}, [] {});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err,
            "kiln group: unknown command 'no-such-command'\ncommands of kiln group: leaf, other\n"
            "Run 'kiln group --help' for more information.\n");
  o = run_kiln({"--json", "tune"}, [] {});
  EXPECT_EQ(o.status, 2);
  o = run_kiln({"tune"}, [] {});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("kiln: unknown command 'tune'\ncommands of kiln: group, single\n", 0), 0u) << o.err;
  o = run_kiln({"group", "--db", "x.db"}, [] {});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("kiln group: a command is required\ncommands of kiln group: leaf, other\n", 0), 0u) << o.err;
  o = run_kiln({}, [] {});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.rfind("kiln: a command is required\n", 0), 0u) << o.err;
  // A missing option is CLI11's own message.
  o = run_kiln({"group", "leaf", "--number"}, [] {});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err.find("unknown command"), std::string::npos) << o.err;
}

TEST(CommandTest, HelpOfACommandShowsTheOptionsItInherits) {
  Outcome o = run_kiln({"group", "leaf", "--help"}, [] {});
  EXPECT_EQ(o.status, 0);
  const size_t at = o.out.find("Options of kiln group, given before leaf or after it:");
  ASSERT_NE(at, std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--db TEXT=./kiln.db", at), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tuning-log file", at), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--json", at), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("--help", at), std::string::npos) << o.out;
  // A command under the top level alone inherits nothing.
  o = run_kiln({"single", "--help"}, [] {});
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.out.find("Options of"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace kiln::cli
