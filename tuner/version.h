#pragma once
// The version of Kiln, as reported by its tools and services.
#include <string>

namespace kiln::tuner {

// "MAJOR.MINOR.PATCH", from the project version in the top-level CMakeLists.txt.
std::string version();

}  // namespace kiln::tuner
