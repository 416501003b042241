#pragma once
// The layout of a compiled-model file (`model.kiln`), shared by the graph compiler that writes it
// and deploy::GraphModule that reads it. See docs/graph.md, "The deployable artifact".
//
//   header (ArtifactHeader, little-endian, header_bytes long)
//   target string | shared library | graph JSON | parameters (64-byte aligned, each constant too)
//
// The checksum is the SHA-256 (hex) of the whole file with the checksum field set to zeros.
#include <cstddef>
#include <cstdint>

namespace kiln::deploy {

inline constexpr char kArtifactMagic[8] = {'K', 'I', 'L', 'N', 'M', 'O', 'D', 'L'};
// Version 2 adds a view's byte offset in its base (`view_offset`, a Concat's input written into its
// output) and Concat steps done in place; every value's `offset` is still absolute, so the runtime
// reads version 1 files unchanged.
inline constexpr uint32_t kArtifactVersion = 2;
inline constexpr uint32_t kArtifactOldestVersion = 1;  // the oldest version this runtime reads
inline constexpr uint64_t kArtifactAlignment = 64;

struct ArtifactSection {
  uint64_t offset = 0;  // from the start of the file
  uint64_t bytes = 0;
};

struct ArtifactHeader {
  char magic[8];
  uint32_t version = kArtifactVersion;
  uint32_t header_bytes = sizeof(ArtifactHeader);
  uint64_t file_bytes = 0;
  ArtifactSection target;
  ArtifactSection library;
  ArtifactSection graph;
  ArtifactSection params;
  char checksum[64];
};
static_assert(sizeof(ArtifactHeader) == 152, "the artifact header's layout is fixed");
inline constexpr size_t kArtifactChecksumOffset = offsetof(ArtifactHeader, checksum);

}  // namespace kiln::deploy
