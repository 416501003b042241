// libFuzzer target over the ONNX importer and the tensor readers. One input is fed, as bytes, to
// import_model_bytes, parse_tensor and deploy::parse_npy. A kiln::UserError is the expected answer to
// a bad input; anything else escaping (an InternalError, another exception, a crash, a sanitizer
// report) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compiler/frontend/onnx/onnx_importer.h"
#include "contracts/error.h"
#include "deploy/npy.h"

namespace {

// onnx_import_fuzzer leaves constant folding off, so that each input is parsed, validated,
// converted and shape-inferred in well under a millisecond. onnx_import_fold_fuzzer (the same file
// with KILN_FUZZ_FOLD_CONSTANTS) folds as `kiln run` does: nodes whose inputs are all constants
// are compiled and evaluated, slower per input but reaching the operators' kernels. Constants are
// capped at 64 MiB to keep each input small in memory.
kiln::frontend::onnx::ImportOptions fuzz_options() {
  kiln::frontend::onnx::ImportOptions options;
#ifdef KILN_FUZZ_FOLD_CONSTANTS
  options.fold_constants = true;
#else
  options.fold_constants = false;
#endif
  options.max_constant_bytes = int64_t{64} << 20;
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const kiln::frontend::onnx::ImportOptions options = fuzz_options();
  const std::string_view bytes(reinterpret_cast<const char *>(data), size);
  try {
    kiln::frontend::onnx::import_model_bytes(bytes, options, "", "fuzz.onnx");
  } catch (const kiln::UserError &) {
  }
  try {
    kiln::frontend::onnx::parse_tensor(bytes, "fuzz.pb");
  } catch (const kiln::UserError &) {
  }
  try {
    kiln::deploy::parse_npy(bytes, "fuzz.npy");
  } catch (const kiln::UserError &) {
  }
  return 0;
}
