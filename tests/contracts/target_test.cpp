// The target grammar: parsing, the canonical form, option access and errors.
#include "contracts/target.h"

#include <gtest/gtest.h>

namespace kiln::contracts {
namespace {

TEST(TargetTest, OptionsAreSortedAndFlagsKeepNoValue) {
  Target t = Target::parse(" cuda  --arch=sm_90 -fast-math -model=h100");
  EXPECT_EQ(t.kind(), "cuda");
  EXPECT_EQ(t.str(), "cuda -arch=sm_90 -fast-math -model=h100");
  ASSERT_EQ(t.options().size(), 3u);
  EXPECT_EQ(t.options()[1].name, "fast-math");
  EXPECT_FALSE(t.options()[1].value.has_value());
  EXPECT_TRUE(t.has("fast-math"));
  EXPECT_EQ(t.value("fast-math"), std::nullopt);
  EXPECT_EQ(t.value("arch"), "sm_90");
  EXPECT_EQ(t.value("mcpu"), std::nullopt);
  EXPECT_EQ(target_model(t), "h100");
}

TEST(TargetTest, AnEmptyValueIsKeptApartFromAFlag) {
  EXPECT_EQ(canonical_target("llvm -mattr="), "llvm -mattr=");
  EXPECT_NE(Target::parse("llvm -mattr="), Target::parse("llvm -mattr"));
  EXPECT_EQ(Target::parse("llvm -mattr=").value("mattr"), "");
}

TEST(TargetTest, ValuesKeepTheirOwnSpelling) {
  // The grammar does not interpret values: feature lists keep their order.
  EXPECT_FALSE(same_target("llvm -mattr=+avx2,+fma", "llvm -mattr=+fma,+avx2"));
  EXPECT_TRUE(same_target("llvm -mattr=+avx2,+fma -mcpu=x", "llvm --mcpu=x -mattr=+avx2,+fma"));
  EXPECT_EQ(canonical_target("vta -model=a=b"), "vta -model=a=b");
}

TEST(TargetTest, ErrorsQuoteTheTargetAndSayWhy) {
  auto message = [](const char *text) {
    try {
      Target::parse(text);
    } catch (const TargetError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(""), "target \"\": empty target");
  EXPECT_EQ(message("-mcpu=x"), "target \"-mcpu=x\": it must start with its kind (llvm, cuda, vta, ...)");
  EXPECT_EQ(message("llvm mcpu=x"), "target \"llvm mcpu=x\": \"mcpu=x\" is not an option (-name or -name=value)");
  EXPECT_EQ(message("llvm --=x"), "target \"llvm --=x\": \"--=x\" has no option name");
  EXPECT_EQ(message("llvm ---x"), "target \"llvm ---x\": \"---x\" has no option name");
  EXPECT_EQ(message("llvm -mcpu=a --mcpu=b"), "target \"llvm -mcpu=a --mcpu=b\": option -mcpu is given twice");
}

TEST(TargetTest, DeviceKeyErrorsNameTheKey) {
  try {
    check_device_key("gpu a100");
    FAIL() << "no error";
  } catch (const TargetError &e) {
    EXPECT_STREQ(e.what(), "device key \"gpu a100\" contains whitespace");
  }
}

}  // namespace
}  // namespace kiln::contracts
