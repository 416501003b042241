#pragma once
// The dashboard's built files (dist/), embedded in the binary by the build
// (tuner/dashboard/embed_assets.cmake writes the definitions).
#include <cstddef>

namespace kiln::tuner::dashboard {

struct Asset {
  const char *path;  // "/index.html", "/app.js", ...
  const char *content_type;
  const unsigned char *data;
  size_t size;
};

// False when npm was not found at build time: then there are no assets.
extern const bool kAssetsBuilt;
extern const Asset kAssets[];
extern const size_t kAssetCount;

}  // namespace kiln::tuner::dashboard
