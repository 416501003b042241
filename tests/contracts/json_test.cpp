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

// Text nested deeper than kJsonMaxDepth is refused before any recursive reader sees it, with the
// byte where the limit was crossed; brackets inside strings do not count.
TEST(Json, DeepTextIsRefusedWithItsPosition) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    Json::parse(deep);
    FAIL() << "parsed 100000 levels";
  } catch (const JsonError &e) {
    EXPECT_EQ(std::string(e.what()), "JSON nested deeper than 256 levels at byte 257");
  }
  std::string objects;
  for (int i = 0; i < 300; ++i) objects += "{\"a\":";
  objects += "1" + std::string(300, '}');
  EXPECT_THROW(Json::parse(objects), JsonError);

  const std::string limit = std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
  EXPECT_EQ(Json::parse(limit).dump(), limit);
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  EXPECT_EQ(Json::parse(in_string)[0].as_string().size(), 2001u);
  EXPECT_NO_THROW(check_json_depth(in_string, 1));
  EXPECT_THROW(check_json_depth("[[1]]", 1), JsonError);
}

TEST(Json, LongTextIsRefused) {
  std::string text = "\"" + std::string(kJsonMaxBytes, 'x') + "\"";
  try {
    Json::parse(text);
    FAIL() << "parsed " << text.size() << " bytes";
  } catch (const JsonError &e) {
    EXPECT_NE(std::string(e.what()).find("longer than the limit"), std::string::npos) << e.what();
  }
}

// A value built deep by code cannot be written (the writer would recurse once per level), and
// freeing it does not recurse either.
TEST(Json, DeepValueBuiltByCodeIsNotWritten) {
  Json deep = 1;
  for (int i = 0; i < 100000; ++i) {
    Json::Array wrapper;
    wrapper.push_back(std::move(deep));
    deep = Json::array(std::move(wrapper));
  }
  try {
    deep.dump();
    FAIL() << "wrote 100000 levels";
  } catch (const JsonError &e) {
    EXPECT_EQ(std::string(e.what()), "cannot write JSON nested deeper than 256 levels");
  }
  Json object = Json::object();
  for (int i = 1; i < kJsonMaxDepth; ++i) object = Json::object({{"a", std::move(object)}});
  EXPECT_NO_THROW(object.dump());
  object = Json::object({{"a", std::move(object)}});
  EXPECT_THROW(object.dump(), JsonError);
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
