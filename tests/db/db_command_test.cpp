// The `kiln db` command, run as a user would: its output, its JSON, and its exit status for good
// and bad input (0 success, 1 the command failed, 2 bad command line).
#include "db/sqlite_db.h"
#include "db/tuning_db.h"
#include "tests/db/db_test_util.h"
#include "tests/db/process_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <poll.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::db {
namespace {

using nlohmann::json;
using testing::dense;
using testing::failed;
using testing::measured;
using testing::skylake;
using testing::znver4;
using testing::znver4_avx512;
namespace fs = std::filesystem;

using Result = testing::Run;

class DbCommandTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    db_path_ = path("kiln.db");
    TuningDb db = TuningDb::open(db_path_);
    std::vector<Record> records;
    for (int i = 0; i < 5; ++i) records.push_back(measured(dense(64), znver4(), i, 0.001 * (5 - i)));
    records.push_back(measured(dense(64), znver4_avx512(), 10, 0.0001));
    records.push_back(measured(dense(64), skylake(), 20, 0.00001));
    records.push_back(failed(dense(64), znver4(), 30));
    records.push_back(measured(dense(128), znver4(), 40, 0.002));
    db.insert(records);
    int64_t job = db.create_job("nightly", {{"tasks", 2}}, 10);
    db.update_job(job, JobState::kRunning, "halfway");
  }

  // Runs `kiln` with `args`; the database is passed with --db unless `with_db` is false. With
  // `unprivileged`, as a user without root's power to write read-only files (spawn()).
  Result kiln(std::vector<std::string> args, bool with_db = true, bool unprivileged = false) {
    if (with_db) {
      args.insert(args.begin() + 1, "--db");
      args.insert(args.begin() + 2, db_path_);
    }
    return testing::run_program(KILN_CLI, args, dir_.string(), unprivileged);
  }

  // Runs `kiln` with `args` (and the database) on a terminal of its own, typing `answer` once the
  // output shows `prompt`. Result.out is everything the terminal showed.
  Result kiln_on_terminal(std::vector<std::string> args, const std::string &prompt, const std::string &answer) {
    args.insert(args.begin() + 1, "--db");
    args.insert(args.begin() + 2, db_path_);
    std::vector<char *> argv;
    std::string program = KILN_CLI;
    argv.push_back(program.data());
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int terminal = -1;
    pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
    if (pid == 0) {
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    Result result;
    if (pid < 0) return result;
    bool answered = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd ready{terminal, POLLIN, 0};
      if (poll(&ready, 1, 100) <= 0) continue;
      char buffer[4096];
      ssize_t n = read(terminal, buffer, sizeof buffer);
      if (n <= 0) break;  // the command ended and closed the terminal
      result.out.append(buffer, static_cast<size_t>(n));
      if (!answered && result.out.find(prompt) != std::string::npos) {
        answered = write(terminal, answer.data(), answer.size()) == static_cast<ssize_t>(answer.size());
      }
    }
    close(terminal);
    result.status = testing::wait_for({pid, -1});
    return result;
  }

  std::string key() const { return dense(64).key; }
  std::string db_path_;
};

bool contains(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

TEST_F(DbCommandTest, WorkloadsListsEachWorkloadAlignedOrAsJson) {
  Result r = kiln({"db", "workloads"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "KEY ")) << r.out;
  EXPECT_TRUE(contains(r.out, key().substr(0, 12))) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);  // header and two workloads
  // Columns line up: every row is as wide as the header up to the last column.
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(row.find("dense"), header.find("TEMPLATE"));

  r = kiln({"db", "workloads", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json list = json::parse(r.out);
  ASSERT_EQ(list.size(), 2u);
  for (const json &w : list) {
    if (w["key"] == key()) {
      EXPECT_EQ(w["records"], 8);
      EXPECT_EQ(w["valid"], 7);
      EXPECT_EQ(w["args"]["M"], 64);
    }
  }
}

TEST_F(DbCommandTest, BestUsesExactTargetThenDeviceClass) {
  Result r = kiln({"db", "best", "-w", key().substr(0, 10), "-t", "llvm -mcpu=znver4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "exact target")) << r.out;
  EXPECT_TRUE(contains(r.out, "index 4")) << r.out;
  EXPECT_TRUE(contains(r.out, "1000.00")) << r.out;  // mean in microseconds

  // --json, with --db after the subcommand.
  Result j = kiln({"db", "best", "--json", "--workload", key(), "--target", "llvm -mcpu=znver4", "--db", db_path_},
                  /*with_db=*/false);
  ASSERT_EQ(j.status, 0) << j.err;
  json best = json::parse(j.out);
  EXPECT_EQ(best["match"], "exact");
  EXPECT_EQ(best["config"]["index"], 4);
  EXPECT_DOUBLE_EQ(best["mean_s"].get<double>(), 0.001);

  // A target string never measured exactly, with its device class: the class's best, never
  // skylake's faster record.
  r = kiln({"db", "best", "-w", key(), "-t", "llvm -mcpu=znver4 -mattr=+avx2", "-d", "x86-znver4", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  best = json::parse(r.out);
  EXPECT_EQ(best["match"], "device_class");
  EXPECT_EQ(best["config"]["index"], 10);

  // The workload can be named by template and arguments too.
  r = kiln({"db", "best", "--template", "dense", "--args", R"({"dtype": "float32", "K": 64, "N": 64, "M": 64})", "-t",
            "llvm -mcpu=skylake", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["config"]["index"], 20);
}

TEST_F(DbCommandTest, BestByTemplateAppliesTheTemplatesDefaults) {
  // dense_pack.x86 records its arguments in canonical form, defaults filled in (out_dtype,
  // epilogue, dtypes), as `kiln measure` and `kiln tune` do.
  const Workload w = Workload::parse(
      "dense_pack.x86", R"({"data":{"dtype":"float32","shape":[1,512]},"epilogue":[],"out_dtype":"float32",)"
                        R"("weight":{"dtype":"float32","shape":[1000,512]}})");
  {
    TuningDb db = TuningDb::open(db_path_);
    db.insert(measured(w, znver4(), 7, 0.0002));
  }
  for (const char *args :
       {R"({"data":{"shape":[1,512]},"weight":{"shape":[1000,512]}})",
        R"({"weight":{"shape":[1000,512],"dtype":"float32"},"data":{"shape":[1,512]},"epilogue":[]})",
        R"({"data":{"dtype":"float32","shape":[1,512]},"epilogue":[],"out_dtype":"float32",)"
        R"("weight":{"dtype":"float32","shape":[1000,512]}})"}) {
    SCOPED_TRACE(args);
    Result r =
        kiln({"db", "best", "--template", "dense_pack.x86", "--args", args, "-t", "llvm -mcpu=znver4", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["config"]["index"], 7);
    EXPECT_EQ(json::parse(r.out)["workload"]["key"], w.key) << r.out;
  }
  // Arguments the template refuses are the template's error.
  Result r = kiln({"db", "best", "--template", "dense_pack.x86", "--args", R"({"data":{"shape":[1,512]}})", "-t",
                   "llvm -mcpu=znver4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "kiln db best: error: workload dense_pack.x86")) << r.err;
}

TEST_F(DbCommandTest, TopPrintsRankedRows) {
  Result r = kiln({"db", "top", "-w", key(), "-t", "llvm -mcpu=znver4", "-k", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4);
  EXPECT_TRUE(contains(r.out, "RANK")) << r.out;

  r = kiln({"db", "top", "-w", key(), "-t", "llvm -mcpu=znver4", "-k", "10", "--scope", "class", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json top = json::parse(r.out);
  ASSERT_EQ(top.size(), 6u);
  EXPECT_EQ(top[0]["config"]["index"], 10);
  EXPECT_EQ(top[0]["match"], "device_class");
  for (size_t i = 1; i < top.size(); ++i) {
    EXPECT_LE(top[i - 1]["mean_s"].get<double>(), top[i]["mean_s"].get<double>());
  }
}

TEST_F(DbCommandTest, HistoryJobsAndStats) {
  Result r = kiln({"db", "history", "--template", "dense", "-d", "x86-znver4", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 8u);
  r = kiln({"db", "history", "--template", "dense", "-d", "x86-znver4", "--valid-only"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 8);  // header and 7 valid

  r = kiln({"db", "jobs"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "nightly")) << r.out;
  EXPECT_TRUE(contains(r.out, "running")) << r.out;
  r = kiln({"db", "jobs", "--id", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["message"], "halfway");
  r = kiln({"db", "jobs", "--id", "7"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "job 7 does not exist")) << r.err;

  r = kiln({"db", "stats", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json stats = json::parse(r.out);
  EXPECT_EQ(stats["records"], 9);
  EXPECT_EQ(stats["valid"], 8);
  EXPECT_EQ(stats["by_error"]["COMPILE_HOST"], 1);
  r = kiln({"db", "stats"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "schema_version")) << r.out;
}

TEST_F(DbCommandTest, ExportImportAndCheck) {
  std::string exported = path("records.jsonl");
  Result r = kiln({"db", "export", "-o", exported});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "exported 9 records")) << r.out;
  r = kiln({"db", "export", "--format", "autotvm", "--valid-only"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    json row = json::parse(line);
    EXPECT_TRUE(row.contains("input") && row.contains("config") && row.contains("result"));
    EXPECT_EQ(row["result"][1], 0);
    ++count;
  }
  EXPECT_EQ(count, 8);

  std::string copy = path("copy.db");
  r = kiln({"db", "--db", copy, "import", exported}, /*with_db=*/false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "imported 9 records")) << r.out;
  r = kiln({"db", "--db", copy, "import", exported, "--json"}, false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["duplicates"], 9);
  r = kiln({"db", "--db", copy, "check"}, false);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ok")) << r.out;
}

TEST_F(DbCommandTest, MalformedImportIsAllOrNothingUnlessAskedToSkip) {
  std::string exported = path("records.jsonl");
  ASSERT_EQ(kiln({"db", "export", "-o", exported}).status, 0);
  std::string text;
  {
    std::ifstream in(exported);
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  size_t second_line = text.find('\n') + 1;
  std::string broken = text.substr(0, second_line) + "this is not json\n" + text.substr(second_line);
  std::string bad_file = path("broken.jsonl");
  std::ofstream(bad_file) << broken;

  std::string target = path("target.db");
  Result r = kiln({"db", "--db", target, "import", bad_file}, false);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "line 2: not valid JSON")) << r.err;
  EXPECT_TRUE(contains(r.err, "nothing was imported")) << r.err;
  EXPECT_TRUE(contains(r.err, "--skip-bad-lines")) << r.err;
  EXPECT_FALSE(contains(r.err, "created new tuning log")) << r.err;
  // The failed import into a new path left no log behind.
  for (const char *suffix : {"", "-wal", "-shm"}) EXPECT_FALSE(fs::exists(target + suffix)) << suffix;

  r = kiln({"db", "--db", target, "import", bad_file, "--skip-bad-lines"}, false);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "imported 9 records")) << r.out;
  EXPECT_TRUE(contains(r.err, "line 2: skipped: not valid JSON")) << r.err;
  EXPECT_TRUE(contains(r.err, "created new tuning log " + target)) << r.err;

  // A failed import into an existing log leaves it as it was.
  r = kiln({"db", "--db", target, "import", bad_file}, false);
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(contains(r.err, "created new tuning log")) << r.err;
  r = kiln({"db", "--db", target, "stats", "--json"}, false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["records"], 9);
}

// A tuning log the user cannot write (a read-only file, or a read-only directory where SQLite
// cannot create the WAL index): the commands that read work, the ones that write say it is
// read-only, and nothing is created beside it.
TEST_F(DbCommandTest, ReadOnlyLogIsReadByReadCommands) {
  auto perms = [](const std::string &p, fs::perms bits) { fs::permissions(p, bits); };
  const fs::perms kReadable = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
  const fs::perms kListable = kReadable | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  perms(dir_.string(), kListable | fs::perms::owner_write);
  std::string exported = path("records.jsonl");
  ASSERT_EQ(kiln({"db", "export", "-o", exported}).status, 0);
  perms(exported, kReadable);

  for (bool directory : {false, true}) {
    SCOPED_TRACE(directory ? "read-only directory" : "read-only file");
    std::string folder = path(directory ? "read-only-directory" : "read-only-file");
    fs::create_directory(folder);
    std::string log = folder + "/kiln.db";
    fs::copy_file(db_path_, log);
    // As root the commands run as nobody: the folder (or the log) is given to it where it may write.
    if (geteuid() == 0) {
      ASSERT_EQ(chown((directory ? log : folder).c_str(), testing::kUnprivilegedUser, testing::kUnprivilegedUser), 0);
    }
    perms(log, directory ? kReadable | fs::perms::owner_write : kReadable);
    perms(folder, directory ? kListable : kListable | fs::perms::owner_write);

    for (const std::vector<std::string> &command :
         std::vector<std::vector<std::string>>{{"stats"},
                                               {"workloads"},
                                               {"check"},
                                               {"export"},
                                               {"history", "--template", "dense", "-d", "x86-znver4"},
                                               {"best", "-w", key(), "-t", "llvm -mcpu=znver4"},
                                               {"top", "-w", key(), "-t", "llvm -mcpu=znver4"},
                                               {"jobs"}}) {
      std::vector<std::string> args = {"db", "--db", log};
      args.insert(args.end(), command.begin(), command.end());
      Result r = kiln(args, false, /*unprivileged=*/true);
      EXPECT_EQ(r.status, 0) << command[0] << ": " << r.err;
    }
    Result r = kiln({"db", "--db", log, "import", exported}, false, true);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(
        contains(r.err, "kiln db import: error: " + log + ": cannot write it: " +
                            (directory ? "its directory " + folder + " is read-only" : "the file is read-only")))
        << r.err;
    r = kiln({"db", "--db", log, "prune", "--all"}, false, true);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "cannot write it")) << r.err;
    if (directory) {
      EXPECT_FALSE(fs::exists(log + "-wal"));
      EXPECT_FALSE(fs::exists(log + "-shm"));
    }
    perms(folder, fs::perms::owner_all);
  }
}

// A SQLite failure that is Kiln's own (here a constraint it should never meet) is an internal
// error, exit status 2; the machine's failures are the user's, exit status 1.
TEST_F(DbCommandTest, SqliteFailuresOfKilnAreInternalErrors) {
  std::string exported = path("records.jsonl");
  ASSERT_EQ(kiln({"db", "export", "-o", exported}).status, 0);
  std::string copy = path("copy.db");
  fs::copy_file(db_path_, copy);
  {
    Database raw(copy);
    raw.exec("DELETE FROM record");
    raw.exec("CREATE TRIGGER refuse BEFORE INSERT ON record BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END");
  }
  Result r = kiln({"db", "--db", copy, "import", exported}, false);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "kiln db import: internal error: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "refused by a trigger")) << r.err;
  EXPECT_TRUE(fs::exists(copy));
}

// Only a command that writes creates a tuning log; one that reads says there is none, creates
// nothing, and does not turn an empty file into a log.
TEST_F(DbCommandTest, ReadCommandsCreateNothing) {
  std::string missing = path("missing.db");
  for (const std::vector<std::string> &command :
       std::vector<std::vector<std::string>>{{"stats"},
                                             {"workloads"},
                                             {"export"},
                                             {"check"},
                                             {"jobs"},
                                             {"history", "--template", "dense", "-d", "x"},
                                             {"best", "-w", "ab", "-t", "llvm", "-d", "x"},
                                             {"prune", "--all"}}) {
    std::vector<std::string> args = {"db", "--db", missing};
    args.insert(args.end(), command.begin(), command.end());
    Result r = kiln(args, false);
    EXPECT_EQ(r.status, 1) << command[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "no tuning log at " + missing)) << command[0] << ": " << r.err;
    EXPECT_FALSE(fs::exists(missing)) << command[0];
  }
  std::string empty = path("empty.db");
  std::ofstream{empty};
  for (const char *command : {"stats", "check", "prune"}) {
    std::vector<std::string> args = {"db", "--db", empty, command};
    if (std::string(command) == "prune") args.push_back("--all");
    Result r = kiln(args, false);
    EXPECT_EQ(r.status, 1) << command;
    EXPECT_TRUE(contains(r.err, empty + " is empty (0 bytes), not a Kiln tuning log")) << r.err;
    EXPECT_EQ(fs::file_size(empty), 0u) << command;
  }
  std::string exported = path("records.jsonl");
  ASSERT_EQ(kiln({"db", "export", "-o", exported}).status, 0);
  Result r = kiln({"db", "--db", empty, "import", exported}, false);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "created new tuning log " + empty)) << r.err;
}

// A record whose arguments nest 100,000 deep (a 200 KB line) is a bad line with a message, not a
// crash of the parser's recursion; the rest of a --skip-bad-lines import goes in.
TEST_F(DbCommandTest, DeeplyNestedImportLineIsRefusedWithAMessage) {
  std::string exported = path("records.jsonl");
  ASSERT_EQ(kiln({"db", "export", "-o", exported}).status, 0);
  std::ifstream in(exported);
  std::string first, rest, line;
  std::getline(in, first);
  while (std::getline(in, line)) rest += line + "\n";
  size_t args = first.find("\"args\":") + 7;
  std::string deep = first.substr(0, args) + std::string(100000, '[') + std::string(100000, ']') +
                     first.substr(first.find(",\"flop\""));
  std::string file = path("deep.jsonl");
  std::ofstream(file) << first << "\n" << deep << "\n" << rest;

  std::string target = path("target.db");
  Result r = kiln({"db", "--db", target, "import", file}, false);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "line 2: JSON nested deeper than 256 levels at byte")) << r.err;
  r = kiln({"db", "--db", target, "import", file, "--skip-bad-lines"}, false);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "line 2: skipped: JSON nested deeper than 256 levels at byte")) << r.err;
  EXPECT_TRUE(contains(r.out, "imported 9 records")) << r.out;
}

// Rows of a log written before insert checked the ranges: `kiln db check` lists them, export stops
// at one rather than write a null for a number, and leaves no file behind.
TEST_F(DbCommandTest, CheckReportsOutOfRangeRowsAndExportWritesNoNull) {
  {
    Database raw(db_path_);
    raw.exec(
        "INSERT INTO record (workload_id, target_id, device_id, config_index, config, error_class, costs, mean_s, "
        "wall_s, measured_at) VALUES (1, 1, 1, -1, '[]', 2, '[]', NULL, 0, 1700000000), "
        "(1, 1, 1, 3, '[]', 0, '[null]', 0.001, 9e999, 5)");
  }
  Result r = kiln({"db", "check"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.out, "1 records with a config index outside 0 .. 2^53 (record ids 10)")) << r.out;
  EXPECT_TRUE(contains(r.out, "1 records with a timestamp outside 2000-01-01 .. a day from now (record ids 11)"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "with costs that are not finite numbers of seconds, > 0 and below 1e6 (record ids 11)"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "with a wall cost that is not a finite number >= 0 (record ids 11)")) << r.out;
  EXPECT_TRUE(contains(r.err, "4 problems found")) << r.err;

  std::string exported = path("records.jsonl");
  r = kiln({"db", "export", "-o", exported});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "record 11 cannot be written as JSON")) << r.err;
  EXPECT_FALSE(fs::exists(exported));
  EXPECT_FALSE(fs::exists(exported + ".partial"));
  r = kiln({"db", "export"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_FALSE(contains(r.out, "null")) << r.out;
}

size_t line_count(const std::string &text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

std::string read_file(const std::string &file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// export -o writes through a symbolic link (which stays a link, also when it names a file not yet
// there) and replaces a regular file only by renaming a complete one over it.
TEST_F(DbCommandTest, ExportWritesThroughSymbolicLinks) {
  std::string real = path("real.jsonl");
  std::ofstream(real) << "old\n";
  fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink("real.jsonl", path("link.jsonl"));
  fs::create_symlink(path("link.jsonl"), path("link-to-link.jsonl"));
  Result r = kiln({"db", "export", "-o", path("link-to-link.jsonl")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(path("link.jsonl")));
  EXPECT_TRUE(fs::is_symlink(path("link-to-link.jsonl")));
  EXPECT_EQ(line_count(read_file(real)), 9u);
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_FALSE(fs::exists(real + ".partial"));

  fs::create_directory(path("sub"));
  fs::create_symlink("sub/new.jsonl", path("dangling.jsonl"));
  r = kiln({"db", "export", "-o", path("dangling.jsonl")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(path("dangling.jsonl")));
  EXPECT_EQ(line_count(read_file(path("sub/new.jsonl"))), 9u);

  r = kiln({"db", "export", "-o", path("sub")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
}

// export -o to a FIFO, a device or /dev/stdout writes into it: the node stays what it was.
TEST_F(DbCommandTest, ExportWritesIntoFifosAndDevices) {
  std::string fifo = path("records.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    // Opened without blocking so that the test ends even if the export never opens the FIFO.
    int fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (fd >= 0 && std::chrono::steady_clock::now() < deadline) {
      pollfd ready{fd, POLLIN, 0};
      poll(&ready, 1, 100);
      char buffer[4096];
      ssize_t n = read(fd, buffer, sizeof buffer);
      if (n > 0) received.append(buffer, static_cast<size_t>(n));
      if (n == 0 && !received.empty()) break;  // the writer closed it
      if (n <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd >= 0) close(fd);
  });
  Result r = kiln({"db", "export", "-o", fifo});
  reader.join();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(line_count(received), 9u) << received;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(fifo + ".partial"));

  // A character device. As root, a null device of the test's own (renaming over /dev/null would
  // replace the machine's); otherwise /dev/null itself, which no one else can rename over.
  std::string device = "/dev/null";
  if (geteuid() == 0) {
    device = path("null");
    ASSERT_EQ(mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
  }
  r = kiln({"db", "export", "-o", device});
  EXPECT_EQ(r.status, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(stat(device.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << device << " is no longer a character device";

  // Standard output named by a path, as /dev/stdout names it: the records on standard output, the
  // summary on standard error. As root, a link of the test's own to /proc/self/fd/1 (which a
  // rename would replace, not /dev/stdout); otherwise /dev/stdout itself.
  std::string standard_output = "/dev/stdout";
  if (geteuid() == 0) {
    standard_output = path("stdout");
    fs::create_symlink("/proc/self/fd/1", standard_output);
  }
  r = kiln({"db", "export", "-o", standard_output});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(line_count(r.out), 9u) << r.out;
  EXPECT_TRUE(contains(r.err, "exported 9 records to " + standard_output)) << r.err;
  EXPECT_TRUE(fs::is_symlink(standard_output));
}

TEST_F(DbCommandTest, PruneKeepsTheBest) {
  Result r = kiln({"db", "prune", "--all", "--keep", "1", "--dry-run", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json dry = json::parse(r.out);
  EXPECT_EQ(dry["deleted_valid"], 4);
  EXPECT_EQ(dry["deleted_failed"], 1);
  r = kiln({"db", "prune", "--all", "--keep", "1", "--vacuum"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "deleted 4 valid and 1 failed records; 4 records remain; freed ")) << r.out;
  EXPECT_TRUE(contains(r.out, "the file shrank from")) << r.out;
}

// On a terminal, prune shows what would go and deletes only when the answer is yes.
TEST_F(DbCommandTest, PruneOnATerminalAsksFirst) {
  auto records = [&] { return json::parse(kiln({"db", "stats", "--json"}).out)["records"].get<int>(); };
  Result r = kiln_on_terminal({"db", "prune", "--all"}, "[y/N]", "n\n");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "would delete 4 valid and 1 failed records from " + db_path_)) << r.out;
  EXPECT_TRUE(contains(r.out, "Delete them? [y/N]")) << r.out;
  EXPECT_TRUE(contains(r.out, "nothing deleted")) << r.out;
  EXPECT_EQ(records(), 9);

  r = kiln_on_terminal({"db", "prune", "--all"}, "[y/N]", "y\n");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "deleted 4 valid and 1 failed records; 4 records remain")) << r.out;
  EXPECT_EQ(records(), 4);

  r = kiln_on_terminal({"db", "prune", "--all", "--keep", "0", "--yes"}, "[y/N]", "n\n");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(contains(r.out, "[y/N]")) << r.out;
  EXPECT_EQ(records(), 0);
}

// A bare `kiln db prune` deletes nothing and names the options that say what to prune; a scope
// prunes only its records.
TEST_F(DbCommandTest, PruneNeedsAScope) {
  Result r = kiln({"db", "prune"});
  EXPECT_EQ(r.status, 1);
  for (const char *option : {"--template", "--device", "--workload", "--all"}) {
    EXPECT_TRUE(contains(r.err, option)) << r.err;
  }
  EXPECT_TRUE(contains(r.err, "nothing was deleted")) << r.err;
  r = kiln({"db", "stats", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["records"], 9);

  EXPECT_EQ(kiln({"db", "prune", "--all", "--template", "dense"}).status, 2);
  r = kiln({"db", "prune", "--template", "danse"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "no workload of template \"danse\"")) << r.err;

  r = kiln({"db", "prune", "-w", key().substr(0, 12), "-d", "x86-znver4", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  json pruned = json::parse(r.out);
  EXPECT_EQ(pruned["deleted_valid"], 4);  // of dense(64)'s five valid records on znver4, one remains
  EXPECT_EQ(pruned["deleted_failed"], 1);
  EXPECT_GE(pruned["freed_bytes"].get<int64_t>(), 0);  // whole pages only: five small records may free none
  EXPECT_GE(pruned["free_bytes"].get<int64_t>(), pruned["freed_bytes"].get<int64_t>());
  r = kiln({"db", "stats", "--json"});
  EXPECT_EQ(json::parse(r.out)["records"], 4);
}

TEST_F(DbCommandTest, BadInputGivesAClearErrorAndANonZeroStatus) {
  Result r = kiln({"db", "best", "-w", "ffff", "-t", "llvm -mcpu=znver4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "kiln db best: error: unknown workload \"ffff\"")) << r.err;
  EXPECT_FALSE(contains(r.err, "internal error")) << r.err;

  r = kiln({"db", "best", "-w", "not-hex", "-t", "llvm -mcpu=znver4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "not a workload key")) << r.err;

  r = kiln({"db", "best", "-w", key(), "-t", "cuda -arch=sm_90"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "unknown target")) << r.err;

  r = kiln({"db", "best", "-w", dense(128).key, "-t", "llvm -mcpu=skylake"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "no valid record")) << r.err;

  r = kiln({"db", "best", "-w", key(), "-t", "-mcpu=znver4", "-d", "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "must start with its kind")) << r.err;

  // Command-line mistakes: status 2.
  EXPECT_EQ(kiln({"db", "best", "-w", key()}).status, 2);  // --target is required
  r = kiln({"db", "no-such-command"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "kiln db: unknown command 'no-such-command'")) << r.err;
  EXPECT_TRUE(contains(r.err, "workloads, best, top")) << r.err;
  r = kiln({"tunes"}, false);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "kiln: unknown command 'tunes'\ncommands of kiln: db, farm, measure, tune")) << r.err;
  EXPECT_EQ(kiln({"db", "top", "-w", key(), "-t", "llvm", "--scope", "nearby"}).status, 2);
  EXPECT_EQ(kiln({"db", "prune", "--all", "--keep", "-3"}).status, 2);
  EXPECT_EQ(kiln({"db"}).status, 2);

  // Files that are not tuning logs.
  r = kiln({"db", "--db", path("missing.db"), "stats"}, false);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "no tuning log at")) << r.err;
  EXPECT_FALSE(fs::exists(path("missing.db")));

  std::string text_file = path("notes.db");
  {
    std::ofstream out(text_file);
    for (int i = 0; i < 100; ++i) out << "not a database at all\n";
  }
  r = kiln({"db", "--db", text_file, "stats"}, false);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "is not a Kiln tuning log")) << r.err;

  {
    Database raw(db_path_);
    raw.exec("PRAGMA user_version = 9");
  }
  r = kiln({"db", "stats"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "newer Kiln")) << r.err;

  r = kiln({"db", "import", path("no-such-file.jsonl")});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "cannot read")) << r.err;
}

TEST_F(DbCommandTest, HelpAndVersionSucceed) {
  Result r = kiln({"--help"}, false);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "db")) << r.out;
  r = kiln({"db", "--help"}, false);
  EXPECT_EQ(r.status, 0);
  for (const char *command :
       {"workloads", "best", "top", "history", "jobs", "stats", "export", "import", "prune", "check"}) {
    EXPECT_TRUE(contains(r.out, command)) << command;
  }
  // A command's help shows the options of its group too.
  r = kiln({"db", "best", "--help"}, false);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "Options of kiln db, given before best or after it:")) << r.out;
  EXPECT_TRUE(contains(r.out, "--db TEXT=./kiln.db")) << r.out;
  EXPECT_TRUE(contains(r.out, "--json")) << r.out;
  r = kiln({"--version"}, false);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "kiln ")) << r.out;
}

}  // namespace
}  // namespace kiln::db
