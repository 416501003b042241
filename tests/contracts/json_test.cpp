// Json: canonical text (sorted keys, compact, 1 vs 1.0), parsing and errors.
#include <gtest/gtest.h>

#include "contracts/json.h"

namespace kiln::contracts {
namespace {

TEST(Json, CanonicalText) {
  Json j = Json::object({{"zeta", 1}, {"alpha", Json::array({1.0, 2.5, "x", true, nullptr})}, {"mid", Json::object()}});
  EXPECT_EQ(j.dump(), "{\"alpha\":[1.0,2.5,\"x\",true,null],\"mid\":{},\"zeta\":1}");
  EXPECT_NE(Json(1).dump(), Json(1.0).dump());
  EXPECT_NE(Json(1), Json(1.0));
  EXPECT_EQ(Json("a\"b\n").dump(), "\"a\\\"b\\n\"");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(int64_t{-9007199254740993}).dump(), "-9007199254740993");
}

TEST(Json, ParseRoundTrip) {
  const std::string text = "{\"b\": [1, 2.0, {\"c\": \"\\u00e9\"}], \"a\": false}";
  Json j = Json::parse(text);
  EXPECT_TRUE(j["a"].is_bool());
  EXPECT_TRUE(j["b"][0].is_int());
  EXPECT_TRUE(j["b"][1].is_float());
  EXPECT_EQ(j.dump(), "{\"a\":false,\"b\":[1,2.0,{\"c\":\"\xc3\xa9\"}]}");
  EXPECT_EQ(Json::parse(j.dump()), j);
}

TEST(Json, Errors) {
  EXPECT_THROW(Json::parse("{\"a\":"), JsonError);
  EXPECT_THROW(Json::parse("[1,]"), JsonError);
  EXPECT_THROW(Json::parse("18446744073709551615"), JsonError);
  EXPECT_THROW(Json(std::string("\xff")).dump(), JsonError);
  EXPECT_THROW(Json(1).as_string(), JsonError);
  EXPECT_THROW(Json::object()["missing"], JsonError);
  EXPECT_THROW(Json::array()[0], JsonError);
}

TEST(Json, ObjectsKeepKeysSortedAndUnique) {
  Json j;
  j.set("b", 1);
  j.set("a", 2);
  j.set("b", 3);
  EXPECT_EQ(j.dump(), "{\"a\":2,\"b\":3}");
  EXPECT_EQ(j.get_or("c", 4).as_int(), 4);
  EXPECT_TRUE(j.contains("a"));
}

}  // namespace
}  // namespace kiln::contracts
