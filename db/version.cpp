#include "db/version.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

namespace kiln::db {

std::string kiln_version() { return KILN_VERSION; }

}  // namespace kiln::db
