#pragma once
// The Kiln version that the tuning log stamps on the records it writes.
#include <string>

namespace kiln::db {

// "MAJOR.MINOR.PATCH", from the project version in the top-level CMakeLists.txt.
std::string kiln_version();

}  // namespace kiln::db
