#pragma once
// SHA-256 (FIPS 180-4), implemented here so that content keys are the same on every platform and
// need no crypto library.
#include <string>
#include <string_view>

namespace kiln::db {

// The SHA-256 digest of `data` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace kiln::db
