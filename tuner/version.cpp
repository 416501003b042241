#include "tuner/version.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

namespace kiln::tuner {

std::string version() { return KILN_VERSION; }

}  // namespace kiln::tuner
