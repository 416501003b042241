// `kiln templates` and `kiln templates show`, run as a user would: every template listed with its
// description and arguments, as a table or JSON; one template's arguments, epilogue format, config
// space and default config, for its example or given arguments; mistakes are errors with status 1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/db/process_util.h"
#include "tests/temp_dir.h"

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::cli {
namespace {

namespace pt = db::testing;
using nlohmann::json;

using Result = pt::Run;

class TemplatesCommandTest : public ::testing::Test {
 protected:
  test::TempDir dir;

  Result kiln(const std::vector<std::string> &args) { return pt::run_program(KILN_CLI, args, dir.path()); }
};

bool has(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

TEST_F(TemplatesCommandTest, ListsEveryTemplateWithItsDescriptionAndArguments) {
  Result r = kiln({"templates"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *name : {"dense_pack.x86", "conv2d_nchwc.x86", "softmax.x86", "reduce.x86", "pool2d.x86"}) {
    EXPECT_TRUE(has(r.out, name)) << name << "\n" << r.out;
  }
  EXPECT_TRUE(has(r.out, "dense with packed weights")) << r.out;
  EXPECT_TRUE(has(r.out, "data, weight [out_dtype, epilogue, prepacked, bn]")) << r.out;

  r = kiln({"templates", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json list = json::parse(r.out);
  ASSERT_EQ(list.size(), 32u);
  for (const json &t : list) {
    EXPECT_FALSE(t["summary"].get<std::string>().empty()) << t["name"];
    ASSERT_FALSE(t["arguments"].empty()) << t["name"];
    for (const json &a : t["arguments"]) {
      EXPECT_TRUE(a.contains("type") && a.contains("required") && a.contains("default")) << a;
      EXPECT_EQ(a["required"].get<bool>(), a["default"].is_null()) << a;
    }
    EXPECT_TRUE(t["example"].is_object()) << t["name"];
  }
}

TEST_F(TemplatesCommandTest, ShowGivesArgumentsEpilogueKnobsAndTheDefaultConfig) {
  Result r = kiln({"templates", "show", "dense_pack.x86"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *text : {"Arguments:", "prepacked", "required", "Epilogue format", "requantize", "bias_add",
                           "Config space:", "tile_y", "split of", "Default config", "the example"}) {
    EXPECT_TRUE(has(r.out, text)) << text << "\n" << r.out;
  }

  const std::string args = R"({"data":{"shape":[4,256]},"weight":{"shape":[64,256]}})";
  r = kiln({"templates", "show", "dense_pack.x86", "--args", args, "--target", "llvm -mcpu=znver4", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json show = json::parse(r.out);
  EXPECT_EQ(show["workload"]["args"]["out_dtype"], "float32");
  EXPECT_EQ(show["workload"]["args"]["weight"]["shape"], json::array({64, 256}));
  EXPECT_FALSE(show["workload"]["from_example"].get<bool>());
  EXPECT_EQ(show["target"], "llvm -mcpu=znver4");
  ASSERT_FALSE(show["space"]["knobs"].empty());
  std::vector<std::string> knobs;
  for (const json &k : show["space"]["knobs"]) knobs.push_back(k["name"]);
  EXPECT_EQ(show["default_config"]["space"], show["space"]["fingerprint"]);
  ASSERT_EQ(show["default_config"]["knobs"].size(), knobs.size());
  for (size_t i = 0; i < knobs.size(); ++i) EXPECT_EQ(show["default_config"]["knobs"][i][0], knobs[i]);
  EXPECT_EQ(show["epilogue_format"].size(), 23u);

  // Every template shows its example.
  r = kiln({"templates", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const json &t : json::parse(r.out)) {
    Result one = kiln({"templates", "show", t["name"].get<std::string>()});
    EXPECT_EQ(one.status, 0) << t["name"] << ": " << one.err;
    EXPECT_TRUE(has(one.out, "Default config")) << one.out;
  }
}

TEST_F(TemplatesCommandTest, MistakesAreErrors) {
  Result r = kiln({"templates", "show", "conv3d.x86"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "kiln templates show: error: unknown operator template 'conv3d.x86'")) << r.err;
  r = kiln({"templates", "show", "dense_pack.x86", "--args", "{\"data\":"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "--args is not JSON")) << r.err;
  r = kiln({"templates", "show", "dense_pack.x86", "--args", R"({"data":{"shape":[4,256]}})"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "workload dense_pack.x86")) << r.err;
  EXPECT_EQ(kiln({"templates", "show"}).status, 2);
}

}  // namespace
}  // namespace kiln::cli
