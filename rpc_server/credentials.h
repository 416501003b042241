#pragma once
// How the farm's processes authenticate each other: the shared token every call carries, and
// optional TLS (a server certificate, and client certificates for mutual TLS).
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

namespace kiln::rpc {

// PEM files. All empty: plaintext.
struct TlsFiles {
  // This side's certificate chain and private key. A server needs both; a client gives them only
  // for mutual TLS.
  std::string cert_file;
  std::string key_file;
  // Certificates that sign the other side's certificate. On a server, setting it requires and
  // verifies client certificates (mutual TLS); on a client, it verifies the server (the system's
  // roots when empty).
  std::string ca_file;
  // A client connecting by TLS to an address whose host is not named in the server's
  // certificate may give the name to check instead (for example "localhost").
  std::string server_name_override;

  bool enabled() const { return !cert_file.empty() || !ca_file.empty(); }
};

// The farm's environment variable for the token, read when no token file is given.
constexpr char kTokenEnvironmentVariable[] = "KILN_FARM_TOKEN";

// The shared token: the first line of `token_file` (surrounding white space removed), or the
// value of KILN_FARM_TOKEN when `token_file` is empty. Throws kiln::UserError when the file
// cannot be read or the token is empty.
std::string load_token(const std::string &token_file);

// Credentials for a server: plaintext when `tls` is not enabled, else TLS with the server's
// certificate (required) and, when tls.ca_file is set, required and verified client
// certificates. Throws kiln::UserError naming a file that cannot be read.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsFiles &tls);

// Credentials for a client, the same way round.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsFiles &tls);

// A channel to `address` with `tls`, allowing messages up to `max_message_bytes`.
std::shared_ptr<grpc::Channel> make_channel(const std::string &address, const TlsFiles &tls,
                                            int max_message_bytes = 64 << 20);

}  // namespace kiln::rpc
