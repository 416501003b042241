#pragma once
// SHA-256 (FIPS 180-4) for content keys: workload keys and config-space fingerprints must be the
// same on every platform, so the digest is computed here byte by byte, independent of the host's
// byte order and of any crypto library.
#include <string>
#include <string_view>

namespace kiln::contracts {

// The SHA-256 digest of `data` as 64 lower-case hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace kiln::contracts
