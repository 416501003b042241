// Kiln's JSON-lines exchange format and the AutoTVM v0.2 export: a round trip keeps every field,
// AutoTVM's layout is what TVM's tools expect, and bad input is reported by line number with the
// good lines imported or none, as the caller chose.
#include "db/record_json.h"
#include "contracts/json.h"
#include "db/error.h"
#include "db/tuning_db.h"
#include "tests/db/db_test_util.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kiln::db {
namespace {

using nlohmann::json;
using testing::dense;
using testing::failed;
using testing::measured;
using testing::skylake;
using testing::znver4;

class RecordJsonTest : public testing::TempDirTest {
 protected:
  std::vector<Record> sample() {
    Record ok = measured(dense(64), znver4(), 17, 0.0);
    ok.costs = {1.21e-5, 1.19e-5, 1.2e-5};
    ok.config.knobs = {{"tile_m", contracts::Json::array({1, 8})}, {"unroll", 1}, {"order", "ikj"}};
    ok.kiln_version = "0.1.0";
    Record bad = failed(dense(64), skylake(), 18, ErrorClass::kInfra);
    bad.kiln_version = "0.1.0";
    Record other =
        measured(Workload::make("conv2d", json::array({json::array({"TENSOR", json::array({1, 3}), "float32"}), 2})),
                 znver4(), 3, 0.002);
    other.kiln_version = "0.1.0";
    return {ok, bad, other};
  }
};

TEST_F(RecordJsonTest, KilnLineHasTheDocumentedFields) {
  json line = json::parse(record_to_json(sample()[0]).dump());
  EXPECT_EQ(line["format"], "kiln-record");
  EXPECT_EQ(line["version"], kRecordFormatVersion);
  EXPECT_EQ(line["workload"]["key"], dense(64).key);
  EXPECT_EQ(line["workload"]["template"], "dense");
  EXPECT_EQ(line["workload"]["args"]["M"], 64);
  EXPECT_EQ(line["target"]["target"], "llvm -mcpu=znver4");
  EXPECT_EQ(line["target"]["device"], "x86-znver4");
  EXPECT_EQ(line["config"]["index"], 17);
  EXPECT_EQ(line["config"]["knobs"][0], json::parse(R"(["tile_m",[1,8]])"));
  EXPECT_EQ(line["result"]["error"], "OK");
  EXPECT_EQ(line["result"]["costs"].size(), 3u);
  EXPECT_NEAR(line["result"]["mean"].get<double>(), 1.2e-5, 1e-12);
  EXPECT_EQ(line["runner"], "runner-test");
  // A failed record has no mean: export writes no null for a number.
  EXPECT_FALSE(json::parse(record_to_json(sample()[1]).dump())["result"].contains("mean"));
}

TEST_F(RecordJsonTest, ExportThenImportKeepsEveryRecord) {
  std::string exported;
  {
    TuningDb source = TuningDb::open(path("source.db"));
    source.insert(sample());
    std::ostringstream out;
    EXPECT_EQ(source.export_records(out, ExportFormat::kKiln), 3);
    exported = out.str();
  }
  EXPECT_EQ(std::count(exported.begin(), exported.end(), '\n'), 3);

  TuningDb copy = TuningDb::open(path("copy.db"));
  std::istringstream in(exported);
  ImportResult result = copy.import_records(in);
  EXPECT_EQ(result.imported, 3);
  EXPECT_EQ(result.duplicates, 0);
  EXPECT_TRUE(result.bad_lines.empty());

  std::ostringstream again;
  copy.export_records(again, ExportFormat::kKiln);
  EXPECT_EQ(again.str(), exported);  // byte for byte

  // Importing the same lines again adds nothing.
  std::istringstream in2(exported);
  result = copy.import_records(in2);
  EXPECT_EQ(result.imported, 0);
  EXPECT_EQ(result.duplicates, 3);
  EXPECT_EQ(copy.stats().records, 3);

  // Filters.
  std::ostringstream valid_only;
  EXPECT_EQ(copy.export_records(valid_only, ExportFormat::kKiln, {"", "", "", true}), 2);
  std::ostringstream one_class;
  EXPECT_EQ(copy.export_records(one_class, ExportFormat::kKiln, {"", "x86-skylake", "", false}), 1);
  std::ostringstream one_template;
  EXPECT_EQ(copy.export_records(one_template, ExportFormat::kKiln, {"conv2d", "", "", false}), 1);
  std::ostringstream one_workload;
  EXPECT_EQ(copy.export_records(one_workload, ExportFormat::kKiln, {"", "", dense(64).key, false}), 2);
}

TEST_F(RecordJsonTest, AutoTvmExportUsesTheV02Layout) {
  TuningDb db = TuningDb::open(path("tuning.db"));
  db.insert(sample());
  std::ostringstream out;
  EXPECT_EQ(db.export_records(out, ExportFormat::kAutoTvm), 3);
  std::istringstream lines(out.str());
  std::string text;
  std::vector<json> rows;
  while (std::getline(lines, text)) rows.push_back(json::parse(text));
  ASSERT_EQ(rows.size(), 3u);

  // Field order as AutoTVM writes it.
  std::string first_line = out.str().substr(0, out.str().find('\n'));
  EXPECT_EQ(first_line.rfind("{\"input\":", 0), 0u) << first_line;

  const json &ok = rows[0];
  ASSERT_EQ(ok["input"].size(), 4u);
  EXPECT_EQ(ok["input"][0], "llvm -mcpu=znver4");
  EXPECT_EQ(ok["input"][1], "dense");
  EXPECT_EQ(ok["input"][2], json::array());
  EXPECT_EQ(ok["input"][3], json::parse(R"({"K":64,"M":64,"N":64,"dtype":"float32"})"));
  EXPECT_EQ(ok["config"]["index"], 17);
  EXPECT_EQ(ok["config"]["code_hash"], "space-v1");
  EXPECT_EQ(ok["config"]["entity"][0], json::parse(R"(["tile_m","ot",[1,8]])"));
  EXPECT_EQ(ok["config"]["entity"][2], json::parse(R"(["order","ot","ikj"])"));
  ASSERT_EQ(ok["result"].size(), 4u);
  EXPECT_EQ(ok["result"][0], json::parse("[1.21e-05,1.19e-05,1.2e-05]"));
  EXPECT_EQ(ok["result"][1], 0);
  EXPECT_DOUBLE_EQ(ok["result"][2].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(ok["result"][3].get<double>(), 1700000017.0);
  EXPECT_DOUBLE_EQ(ok["version"].get<double>(), 0.2);
  EXPECT_EQ(ok["tvm_version"], "kiln-0.1.0");

  const json &bad = rows[1];
  EXPECT_EQ(bad["result"][0], json::parse("[1e9]"));
  EXPECT_EQ(bad["result"][1], 8);  // INFRA has no AutoTVM number of its own

  const json &array_args = rows[2];
  EXPECT_EQ(array_args["input"][2], json::parse(R"([["TENSOR",[1,3],"float32"],2])"));
  EXPECT_EQ(array_args["input"][3], json::object());
}

std::string kiln_lines(const std::vector<Record> &records) {
  std::string text;
  for (const Record &r : records) text += record_to_json(r).dump() + "\n";
  return text;
}

TEST_F(RecordJsonTest, BadLineAbortsTheWholeImportByDefault) {
  std::vector<Record> good = sample();
  std::string text =
      kiln_lines({good[0]}) + "\n" + "{\"format\":\"kiln-record\",\"version\":1,\n" + kiln_lines({good[1], good[2]});
  TuningDb db = TuningDb::open(path("tuning.db"));
  std::istringstream in(text);
  try {
    db.import_records(in);
    FAIL() << "expected TuningDbError";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput));
    EXPECT_NE(std::string(e.what()).find("line 3: not valid JSON"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nothing was imported"), std::string::npos) << e.what();
  }
  EXPECT_EQ(db.stats().records, 0);
  EXPECT_EQ(db.stats().workloads, 0);
}

TEST_F(RecordJsonTest, SkippingBadLinesImportsTheGoodOnesAndNamesTheBad) {
  std::vector<Record> good = sample();
  json wrong_key = record_to_json(good[0]);
  wrong_key["workload"]["key"] = std::string(64, '0');
  json newer = record_to_json(good[0]);
  newer["version"] = 2;
  json unknown_error = record_to_json(good[0]);
  unknown_error["result"]["error"] = "EXPLODED";
  json no_costs = record_to_json(good[0]);
  no_costs["result"]["costs"] = json::array();
  json bad_target = record_to_json(good[0]);
  bad_target["target"]["target"] = "-mcpu=znver4";
  std::string autotvm = R"({"input":["llvm","dense",[],{}],"config":{"index":1,"code_hash":null,"entity":[]},)"
                        R"("result":[[1e-5],0,1.0,1.0],"version":0.2,"tvm_version":"0.8"})";

  std::string text = kiln_lines({good[0]}) +        // 1
                     wrong_key.dump() + "\n" +      // 2
                     newer.dump() + "\n" +          // 3
                     kiln_lines({good[1]}) +        // 4
                     unknown_error.dump() + "\n" +  // 5
                     no_costs.dump() + "\r\n" +     // 6
                     "[1, 2, 3]\n" +                // 7
                     autotvm + "\n" +               // 8
                     bad_target.dump() + "\n" +     // 9
                     "   \n" +                      // 10: blank, skipped
                     kiln_lines({good[2]});         // 11
  TuningDb db = TuningDb::open(path("tuning.db"));
  std::istringstream in(text);
  ImportResult result = db.import_records(in, {true, {}});
  EXPECT_EQ(result.imported, 3);
  ASSERT_EQ(result.bad_lines.size(), 7u);
  std::vector<std::pair<int64_t, std::string>> expected = {
      {2, "does not match its template and arguments"},
      {3, "newer Kiln"},
      {5, "unknown error class \"EXPLODED\""},
      {6, "at least one cost"},
      {7, "must be a JSON object"},
      {8, "AutoTVM log line"},
      {9, "must start with its kind"},
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(result.bad_lines[i].line, expected[i].first);
    EXPECT_NE(result.bad_lines[i].message.find(expected[i].second), std::string::npos)
        << "line " << expected[i].first << ": " << result.bad_lines[i].message;
  }
  EXPECT_EQ(db.stats().records, 3);
  EXPECT_TRUE(db.check().ok());
}

// A line nested 100,000 deep (which would exhaust the parser's stack) and a line longer than 1 MiB
// are bad lines like any other: named by number, skipped on request, the rest imported.
TEST_F(RecordJsonTest, DeepAndLongLinesAreBadLines) {
  std::vector<Record> good = sample();
  std::string deep = kiln_lines({good[0]});
  size_t args = deep.find("\"args\":") + 7;
  size_t args_end = deep.find(",\"flop\"");
  deep = deep.substr(0, args) + std::string(100000, '[') + std::string(100000, ']') + deep.substr(args_end);
  json huge = record_to_json(good[1]);
  huge["result"]["message"] = std::string(kMaxRecordLineBytes, 'x');
  std::string text = kiln_lines({good[0]}) + deep + huge.dump() + "\n" + kiln_lines({good[1], good[2]});

  TuningDb db = TuningDb::open(path("tuning.db"));
  std::istringstream all_or_nothing(text);
  try {
    db.import_records(all_or_nothing);
    FAIL() << "expected TuningDbError";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput));
    // The line and its workload are two levels: the 255th bracket of the arguments is one too many.
    EXPECT_NE(std::string(e.what()).find("line 2: JSON nested deeper than 256 levels at byte " +
                                         std::to_string(args + contracts::kJsonMaxDepth - 1)),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(db.stats().records, 0);

  std::istringstream in(text);
  ImportResult result = db.import_records(in, {true, {}});
  EXPECT_EQ(result.imported, 3);
  ASSERT_EQ(result.bad_lines.size(), 2u);
  EXPECT_EQ(result.bad_lines[0].line, 2);
  EXPECT_NE(result.bad_lines[0].message.find("JSON nested deeper than 256 levels"), std::string::npos)
      << result.bad_lines[0].message;
  EXPECT_EQ(result.bad_lines[1].line, 3);
  EXPECT_NE(result.bad_lines[1].message.find("longer than the limit of 1048576 bytes"), std::string::npos)
      << result.bad_lines[1].message;
  EXPECT_EQ(db.stats().records, 3);

  // Stored arguments are read with the same limit: a log written before it is reported, not a crash.
  EXPECT_THROW(parse_json(std::string(300, '[') + std::string(300, ']')), TuningDbError);
}

// Import refuses numbers outside their ranges (db/record.h) naming the line's field; an index
// beyond 64 bits is out of range, not -1.
TEST_F(RecordJsonTest, OutOfRangeFieldsAreNamed) {
  json line = record_to_json(sample()[0]);
  auto message_with = [&](const std::string &outer, const std::string &inner, const json &value) {
    json copy = line;
    if (inner.empty()) {
      copy[outer] = value;
    } else {
      copy[outer][inner] = value;
    }
    TuningDb db = TuningDb::open(path("tuning.db"));
    std::istringstream in(copy.dump() + "\n");
    ImportResult result = db.import_records(in, {true, {}});
    if (result.bad_lines.empty()) return std::string("accepted");
    return result.bad_lines[0].message;
  };
  auto expect_message = [&](const std::string &outer, const std::string &inner, const json &value,
                            const std::string &needle) {
    std::string message = message_with(outer, inner, value);
    EXPECT_NE(message.find(needle), std::string::npos) << value.dump() << ": " << message;
  };
  expect_message("config", "index", json(18446744073709551615ull),
                 "field \"config.index\" 18446744073709551615 is out of range (0 .. 2^53)");
  expect_message("config", "index", json(-1), "field \"config.index\" -1 is out of range (0 .. 2^53)");
  expect_message("config", "index", json(9007199254740993ll), "field \"config.index\" 9007199254740993 is out");
  expect_message("result", "costs", json::array({1e-5, 0}), "field \"result.costs\" holds 0");
  expect_message("result", "costs", json::array({2e6}), "field \"result.costs\" holds 2e+06");
  expect_message("result", "costs", json::array({1e-5, nullptr}), "field \"result.costs\" must hold numbers");
  expect_message("result", "costs", json::array(), "field \"result.costs\" is empty");
  expect_message("result", "wall", json(-1), "field \"result.wall\" -1");
  EXPECT_EQ(message_with("runner", "", json("runner-8")), "accepted");
  expect_message("timestamp", "", json(12), "field \"timestamp\" 12 is out of range");
  expect_message("timestamp", "", json(4e9), "field \"timestamp\" 4e+09 is out of range");
  expect_message("timestamp", "", json(0), "accepted");
  expect_message("version", "", json(18446744073709551615ull), "newer Kiln");
}

// Long imports and exports report their progress every 1,000 lines, for the command's display.
TEST_F(RecordJsonTest, ImportAndExportReportProgress) {
  std::vector<Record> records;
  for (int i = 0; i < 2500; ++i) records.push_back(measured(dense(64), znver4(), i, 0.001));
  std::vector<int64_t> seen;
  std::ostringstream out;
  {
    TuningDb source = TuningDb::open(path("source.db"));
    source.insert(records);
    EXPECT_EQ(source.export_records(out, ExportFormat::kKiln, {}, [&](int64_t n) { seen.push_back(n); }), 2500);
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1000, 2000}));
  seen.clear();
  TuningDb copy = TuningDb::open(path("copy.db"));
  std::istringstream in(out.str());
  ImportOptions options;
  options.progress = [&](int64_t n) { seen.push_back(n); };
  EXPECT_EQ(copy.import_records(in, options).imported, 2500);
  EXPECT_EQ(seen, (std::vector<int64_t>{1000, 2000}));
}

TEST_F(RecordJsonTest, MissingFieldsAreNamed) {
  json line = record_to_json(sample()[0]);
  auto message_without = [&](const std::string &outer, const std::string &inner) {
    json copy = line;
    if (inner.empty()) {
      copy.erase(outer);
    } else {
      copy[outer].erase(inner);
    }
    try {
      record_from_json(copy);
      return std::string("accepted");
    } catch (const TuningDbError &e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(message_without("workload", "").find("missing field \"workload\""), std::string::npos);
  EXPECT_NE(message_without("workload", "args").find("workload.args"), std::string::npos);
  EXPECT_NE(message_without("target", "device").find("target.device"), std::string::npos);
  EXPECT_NE(message_without("config", "index").find("config.index"), std::string::npos);
  EXPECT_NE(message_without("result", "error").find("result.error"), std::string::npos);
  EXPECT_EQ(message_without("runner", ""), "accepted");  // optional
  EXPECT_EQ(message_without("result", "mean"), "accepted");
}

}  // namespace
}  // namespace kiln::db
