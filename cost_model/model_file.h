#pragma once
// The container of a saved XgbCostModel (internal to cost_model/, and to its tests):
//
//   "KILN-COST-MODEL 1\n"                 magic line: the format and its version
//   u64 little-endian  header length H
//   H bytes            header: canonical JSON (contracts/json.h) describing the model
//   u64 little-endian  model length M
//   M bytes            XGBoost's model (UBJSON)
//   64 bytes           SHA-256 of every byte before it, as lower-case hex
//
// The checksum makes any change of the bytes (a flipped bit, a partial copy) an error before the
// header or XGBoost read them.
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cost_model {

inline constexpr std::string_view kModelMagic = "KILN-COST-MODEL 1\n";

struct ModelFile {
  std::string header;  // JSON text
  std::vector<char> model;
};

// The file's bytes for `file`.
std::string encode_model_file(const ModelFile &file);
// The parts of a file's bytes; throws CostModelError naming `path` for bytes that are not a Kiln
// cost model, of another format version, truncated or corrupt.
ModelFile decode_model_file(const std::string &bytes, const std::string &path);

// The whole content of the file at `path`; throws CostModelError when it cannot be read.
std::string read_model_file(const std::string &path);
// Writes `bytes` to `path` atomically: to a temporary file next to it, flushed to disk, then
// renamed over `path`. Throws CostModelError when that fails, having removed the temporary file;
// an existing file at `path` is then untouched.
void write_model_file(const std::string &path, const std::string &bytes);

}  // namespace kiln::cost_model
