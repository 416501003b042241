// ConfigRecord: the config as every component exchanges it, its canonical knobs text, and the
// errors for knobs that are not knobs.
#include "contracts/config.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::contracts {
namespace {

std::string error_of(const std::string &knobs_text) {
  try {
    ConfigRecord::parse(0, "space", knobs_text);
  } catch (const ConfigRecordError &e) {
    return e.what();
  } catch (const std::exception &e) {
    return std::string("not a ConfigRecordError: ") + e.what();
  }
  return "no error";
}

TEST(ConfigRecord, KnobsHaveOneCanonicalTextInKnobOrder) {
  const ConfigRecord r = ConfigRecord::make(
      12, "ab12",
      {{"tile_y", Json::array({7, 8})}, {"order", "ijk"}, {"f", 1.0}, {"m", Json::object({{"b", 1}, {"a", 2}})}});
  EXPECT_EQ(r.knobs_json(), R"([["tile_y",[7,8]],["order","ijk"],["f",1.0],["m",{"a":2,"b":1}]])");
  EXPECT_EQ(ConfigRecord::parse(12, "ab12",
                                " [ [\"tile_y\", [7, 8]],\n[\"order\",\"ijk\"], [\"f\", 1.0], "
                                "[\"m\", {\"b\": 1, \"a\": 2}] ] "),
            r);
}

TEST(ConfigRecord, TheObjectFormGivesTheKnobsInNameOrder) {
  const ConfigRecord r = ConfigRecord::parse(3, "fp", R"({"unroll": 1, "tile": [4, 8]})");
  EXPECT_EQ(r.knobs_json(), R"([["tile",[4,8]],["unroll",1]])");
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.space, "fp");
}

TEST(ConfigRecord, OneAndOnePointZeroAreDifferentKnobValues) {
  EXPECT_NE(ConfigRecord::parse(0, "s", R"([["f",1]])"), ConfigRecord::parse(0, "s", R"([["f",1.0]])"));
}

TEST(ConfigRecord, MalformedKnobsAreRefusedSayingWhatIsWrong) {
  EXPECT_NE(error_of(R"([["tile", [1,2])").find("not valid JSON"), std::string::npos) << error_of("[[");
  EXPECT_NE(error_of("3").find("got int"), std::string::npos) << error_of("3");
  EXPECT_NE(error_of(R"([["tile"]])").find(R"(entry ["tile"] is not a ["knob", value] pair)"), std::string::npos)
      << error_of(R"([["tile"]])");
  EXPECT_NE(error_of(R"([[1, 2]])").find("is not a"), std::string::npos);
  EXPECT_NE(error_of(R"([["tile", 1], ["tile", 2]])").find("knob tile is given twice"), std::string::npos);
  EXPECT_NE(error_of(R"([["", 1]])").find("empty name"), std::string::npos);
}

TEST(ConfigRecord, ANegativeIndexIsRefused) {
  try {
    ConfigRecord::make(-1, "s", {});
    FAIL() << "a negative index was accepted";
  } catch (const ConfigRecordError &e) {
    EXPECT_NE(std::string(e.what()).find("config index -1 is negative"), std::string::npos) << e.what();
  }
}

TEST(ConfigRecord, ErrorsAreUserErrors) { EXPECT_THROW(ConfigRecord::parse(0, "s", "{"), UserError); }

}  // namespace
}  // namespace kiln::contracts
