#include "cost_model/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "contracts/sha256.h"
#include "cost_model/cost_model.h"

namespace kiln::cost_model {

namespace {

constexpr size_t kLengthBytes = 8;
constexpr size_t kChecksumBytes = 64;
// Every format version shares this prefix of the magic line.
constexpr std::string_view kMagicPrefix = "KILN-COST-MODEL ";

void append_length(std::string &out, uint64_t n) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
}

uint64_t read_length(const std::string &bytes, size_t at) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return n;
}

std::string truncated(const std::string &path, size_t size, const std::string &what) {
  return detail::concat(path, " is truncated: ", size, " bytes end before ", what);
}

}  // namespace

std::string encode_model_file(const ModelFile &file) {
  std::string out(kModelMagic);
  append_length(out, file.header.size());
  out += file.header;
  append_length(out, file.model.size());
  out.append(file.model.data(), file.model.size());
  out += contracts::sha256_hex(out);
  return out;
}

ModelFile decode_model_file(const std::string &bytes, const std::string &path) {
  const size_t size = bytes.size();
  if (bytes.compare(0, kModelMagic.size(), kModelMagic) != 0) {
    if (size > 0 && size < kModelMagic.size() && kModelMagic.substr(0, size) == bytes) {
      throw CostModelError(truncated(path, size, "the end of its first line"));
    }
    if (bytes.compare(0, kMagicPrefix.size(), kMagicPrefix) != 0) {
      throw CostModelError(path + " is not a Kiln cost model");
    }
    const size_t end = std::min(bytes.find('\n'), kMagicPrefix.size() + 16);
    throw CostModelError(detail::concat(path, " is a Kiln cost model of format '",
                                        bytes.substr(kMagicPrefix.size(), end - kMagicPrefix.size()),
                                        "'; this build reads format 1"));
  }
  // Walk the length-prefixed parts, checking each fits before reading it (lengths are compared,
  // never added, so that a huge length cannot overflow).
  size_t at = kModelMagic.size();
  if (size - at < kLengthBytes) throw CostModelError(truncated(path, size, "the header length"));
  const uint64_t header_length = read_length(bytes, at);
  at += kLengthBytes;
  if (size - at < header_length) throw CostModelError(truncated(path, size, "the end of the header"));
  const size_t header_at = at;
  at += header_length;
  if (size - at < kLengthBytes) throw CostModelError(truncated(path, size, "the model length"));
  const uint64_t model_length = read_length(bytes, at);
  at += kLengthBytes;
  if (size - at < model_length) throw CostModelError(truncated(path, size, "the end of the model"));
  const size_t model_at = at;
  at += model_length;
  if (size - at < kChecksumBytes) throw CostModelError(truncated(path, size, "the end of the checksum"));
  if (size - at > kChecksumBytes) {
    throw CostModelError(detail::concat(path, " is corrupt: ", size - at - kChecksumBytes, " stray bytes at its end"));
  }
  if (contracts::sha256_hex(std::string_view(bytes.data(), at)) != bytes.substr(at)) {
    throw CostModelError(path + " is corrupt: its checksum does not match its content");
  }
  ModelFile file;
  file.header = bytes.substr(header_at, header_length);
  file.model.assign(bytes.begin() + static_cast<std::ptrdiff_t>(model_at),
                    bytes.begin() + static_cast<std::ptrdiff_t>(model_at + model_length));
  return file;
}

std::string read_model_file(const std::string &path) {
  auto fail = [&](int error) { return CostModelError("cannot read model file " + path + ": " + std::strerror(error)); };
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw fail(errno);
  std::string bytes;
  char buffer[1 << 16];
  // The magic line first: a large foreign file is refused without reading it all.
  size_t got = std::fread(buffer, 1, kMagicPrefix.size(), f.get());
  bytes.append(buffer, got);
  if (got == kMagicPrefix.size() && bytes != kMagicPrefix) throw CostModelError(path + " is not a Kiln cost model");
  while ((got = std::fread(buffer, 1, sizeof buffer, f.get())) > 0) bytes.append(buffer, got);
  if (std::ferror(f.get())) throw fail(errno ? errno : EIO);
  return bytes;
}

void write_model_file(const std::string &path, const std::string &bytes) {
  // A name no other writer uses: this process's id, and a counter for this process's threads.
  static std::atomic<unsigned> counter{0};
  const std::string temp = detail::concat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  auto fail = [&](const std::string &what, int error, bool created) {
    if (created) unlink(temp.c_str());
    return CostModelError("cannot write model file " + path + ": " + what + ": " + std::strerror(error));
  };

  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw fail("creating " + temp, errno, false);
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      throw fail("writing", error, true);
    }
    written += static_cast<size_t>(n);
  }
  // Flushed before the rename, so that a crash leaves the old file or the whole new one.
  if (fsync(fd) != 0) {
    int error = errno;
    close(fd);
    throw fail("flushing", error, true);
  }
  if (close(fd) != 0) throw fail("closing", errno, true);
  if (std::rename(temp.c_str(), path.c_str()) != 0) throw fail("renaming " + temp, errno, true);
}

}  // namespace kiln::cost_model
