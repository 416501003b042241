// Content keys, canonical JSON, canonical target strings and error-class names: the identities
// that every part of Kiln must agree on, on every platform.
#include "db/workload.h"
#include "db/error.h"
#include "db/error_class.h"
#include "db/job.h"
#include "db/target.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::db {
namespace {

TEST(WorkloadTest, KeyIsAFixedValueOnEveryPlatform) {
  Workload w = Workload::make("dense", {{"M", 64}, {"N", 64}, {"K", 64}, {"dtype", "float32"}});
  EXPECT_EQ(w.args, R"({"K":64,"M":64,"N":64,"dtype":"float32"})");
  EXPECT_EQ(w.key, "e733d46c54f34c29dba8bae3d73b981da1e3f30e73c4a25f86e944479d1c6c41");

  // Nested arrays, a float, and non-ASCII text, as written in db/FORMAT.md's rules.
  Workload conv = Workload::parse("conv2d_nchw.x86", R"({
      "data": ["TENSOR", [1, 64, 56, 56], "float32"],
      "kernel": ["TENSOR", [64, 64, 3, 3], "float32"],
      "strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1],
      "out_dtype": "float32", "alpha": 0.5, "name": "\u00dcn\u00ef"})");
  EXPECT_EQ(conv.args,
            "{\"alpha\":0.5,\"data\":[\"TENSOR\",[1,64,56,56],\"float32\"],\"dilation\":[1,1],"
            "\"kernel\":[\"TENSOR\",[64,64,3,3],\"float32\"],\"name\":\"\xc3\x9cn\xc3\xaf\","
            "\"out_dtype\":\"float32\",\"padding\":[1,1,1,1],\"strides\":[1,1]}");
  EXPECT_EQ(conv.key, "3b57e20dc635f3a62120d8909c4f518b878b357c65645282900515fcbb5dfaa8");
}

TEST(WorkloadTest, KeyDependsOnContentNotSpelling) {
  Workload a = Workload::parse("dense", R"({"M": 64, "N": 32})");
  Workload b = Workload::parse("dense", "{\n  \"N\":32,\"M\":64\n}");
  EXPECT_EQ(a.key, b.key);
  EXPECT_NE(a.key, Workload::parse("dense", R"({"M": 64, "N": 33})").key);
  EXPECT_NE(a.key, Workload::parse("dense.cuda", R"({"M": 64, "N": 32})").key);
  // An integer and a float are different arguments.
  EXPECT_NE(Workload::parse("t", "[1]").key, Workload::parse("t", "[1.0]").key);
  EXPECT_EQ(canonical_json(nlohmann::json::parse("[1.0, 1e-5, 100]")), "[1.0,1e-05,100]");
}

TEST(WorkloadTest, BadWorkloadsAreRejectedWithAMessage) {
  auto expect_bad = [](auto make, const std::string &needle) {
    try {
      make();
      FAIL() << "expected TuningDbError";
    } catch (const TuningDbError &e) {
      EXPECT_EQ(e.kind(), TuningDbError::Kind::kBadInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad([] { Workload::make("", {{"M", 1}}); }, "template name is empty");
  expect_bad([] { Workload::make("a\nb", {{"M", 1}}); }, "line break");
  expect_bad([] { Workload::make("dense", {{"M", 1}}, -1); }, "flop");
  expect_bad([] { Workload::parse("dense", "{\"M\": "); }, "not valid JSON");
  expect_bad([] { Workload::make("dense", std::string("\xff\xfe")); }, "canonicalise");
}

TEST(TargetTest, CanonicalFormSortsOptions) {
  EXPECT_EQ(canonical_target("llvm"), "llvm");
  EXPECT_EQ(canonical_target("  llvm   -mcpu=znver4  "), "llvm -mcpu=znver4");
  EXPECT_EQ(canonical_target("llvm -mcpu=znver4 -mattr=+avx2,+fma --opt-level=3"),
            "llvm -mattr=+avx2,+fma -mcpu=znver4 -opt-level=3");
  EXPECT_EQ(canonical_target("cuda -arch=sm_90 -libs"), "cuda -arch=sm_90 -libs");
  EXPECT_EQ(canonical_target(canonical_target("vta -model=1x16 -device=sim")), "vta -device=sim -model=1x16");

  EXPECT_THROW(canonical_target(""), TuningDbError);
  EXPECT_THROW(canonical_target("-mcpu=znver4"), TuningDbError);
  EXPECT_THROW(canonical_target("llvm mcpu=znver4"), TuningDbError);
  EXPECT_THROW(canonical_target("llvm -mcpu=a -mcpu=b"), TuningDbError);
  EXPECT_THROW(canonical_target("llvm -=x"), TuningDbError);
}

TEST(TargetTest, MakeChecksTheDeviceKeyAndFindsTheModel) {
  Target t = Target::make("llvm -mcpu=znver4 -mattr=+avx2", "x86-znver4");
  EXPECT_EQ(t.target, "llvm -mattr=+avx2 -mcpu=znver4");
  EXPECT_EQ(t.device_key, "x86-znver4");
  EXPECT_EQ(t.model, "znver4");
  EXPECT_EQ(Target::make("cuda -arch=sm_90", "h100").model, "sm_90");
  EXPECT_EQ(Target::make("vta -model=1x16_i8", "vta-sim").model, "1x16_i8");
  EXPECT_EQ(Target::make("llvm", "x86", "given").model, "given");
  EXPECT_THROW(Target::make("llvm", ""), TuningDbError);
  EXPECT_THROW(Target::make("llvm", "x86 znver4"), TuningDbError);
}

TEST(ErrorClassTest, NamesAndCodesAreStable) {
  const char *names[] = {"OK",           "INSTANTIATION", "COMPILE_HOST", "COMPILE_DEVICE", "RUNTIME_DEVICE",
                         "WRONG_ANSWER", "BUILD_TIMEOUT", "RUN_TIMEOUT",  "UNKNOWN",        "INFRA"};
  for (int code = 0; code < kErrorClassCount; ++code) {
    auto error = static_cast<ErrorClass>(code);
    EXPECT_EQ(to_string(error), names[code]);
    EXPECT_EQ(parse_error_class(names[code]), error);
    EXPECT_EQ(error_class_from_code(code), error);
  }
  EXPECT_EQ(parse_error_class("ok"), std::nullopt);
  EXPECT_EQ(error_class_from_code(10), std::nullopt);
  EXPECT_EQ(autotvm_error_no(ErrorClass::kRunTimeout), 7);
  EXPECT_EQ(autotvm_error_no(ErrorClass::kInfra), 8);

  EXPECT_EQ(parse_job_state("running"), JobState::kRunning);
  EXPECT_EQ(to_string(JobState::kCancelled), "cancelled");
  EXPECT_EQ(parse_job_state("stopped"), std::nullopt);
  EXPECT_TRUE(is_finished(JobState::kDone));
  EXPECT_FALSE(is_finished(JobState::kPaused));
}

}  // namespace
}  // namespace kiln::db
