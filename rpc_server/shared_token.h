#pragma once
// The farm's shared-token check: a client sends "authorization: Bearer <token>" in the call
// metadata, and every Kiln service compares it with the token it was configured with.
#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string>

namespace kiln::rpc {

// Adds the token to a client call's metadata.
void attach_token(grpc::ClientContext &context, const std::string &token);

// Whether an "authorization" value (HTTP header or call metadata) is "Bearer <token>", compared
// in time independent of where the strings first differ.
bool bearer_matches(const std::string &authorization, const std::string &token);

// OK when the call carries `token`; UNAUTHENTICATED when it carries none or another one.
grpc::Status check_token(const grpc::ServerContextBase &context, const std::string &token);

}  // namespace kiln::rpc
