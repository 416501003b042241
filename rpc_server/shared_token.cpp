#include "rpc_server/shared_token.h"

namespace kiln::rpc {

namespace {

constexpr char kMetadataKey[] = "authorization";
constexpr char kScheme[] = "Bearer ";

// Compares in time independent of where the strings first differ.
bool same_secret(const std::string &a, const std::string &b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool bearer_matches(const std::string &authorization, const std::string &token) {
  return same_secret(authorization, kScheme + token);
}

void attach_token(grpc::ClientContext &context, const std::string &token) {
  context.AddMetadata(kMetadataKey, kScheme + token);
}

grpc::Status check_token(const grpc::ServerContextBase &context, const std::string &token) {
  const auto &metadata = context.client_metadata();
  auto range = metadata.equal_range(kMetadataKey);
  for (auto it = range.first; it != range.second; ++it) {
    if (bearer_matches(std::string(it->second.data(), it->second.size()), token)) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      range.first == range.second ? "missing farm token" : "wrong farm token");
}

}  // namespace kiln::rpc
