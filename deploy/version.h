#pragma once
// The version of Kiln, as reported by its runtime, tools and services.
#include <string>

namespace kiln::deploy {

// "MAJOR.MINOR.PATCH", from the project version in the top-level CMakeLists.txt.
std::string version();

}  // namespace kiln::deploy
