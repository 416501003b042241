#include "deploy/version.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

namespace kiln::deploy {

std::string version() { return KILN_VERSION; }

}  // namespace kiln::deploy
