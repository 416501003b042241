#include "rpc_server/credentials.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "contracts/error.h"

namespace kiln::rpc {

namespace {

std::string read_file(const std::string &path, const char *what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(std::string("cannot read the ") + what + " file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    throw UserError(std::string("the ") + what + " file " + path + " is empty");
  }
  return text.str();
}

std::string trim(const std::string &text) {
  const char *space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

}  // namespace

std::string load_token(const std::string &token_file) {
  std::string token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) throw UserError("cannot read the token file " + token_file);
    std::getline(in, token);
    token = trim(token);
    if (token.empty()) throw UserError("the token file " + token_file + " is empty");
  } else {
    const char *value = std::getenv(kTokenEnvironmentVariable);
    token = trim(value ? value : "");
    if (token.empty()) {
      throw UserError(std::string("no farm token: give --token-file or set ") + kTokenEnvironmentVariable);
    }
  }
  return token;
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsFiles &tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    throw UserError("a TLS server needs both a certificate and a private key file");
  }
  grpc::SslServerCredentialsOptions options(tls.ca_file.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_key_cert_pairs.push_back(
      {read_file(tls.key_file, "TLS key"), read_file(tls.cert_file, "TLS certificate")});
  if (!tls.ca_file.empty()) options.pem_root_certs = read_file(tls.ca_file, "TLS CA");
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsFiles &tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw UserError("a TLS client certificate needs its private key, and the other way round");
  }
  grpc::SslCredentialsOptions options;
  if (!tls.ca_file.empty()) options.pem_root_certs = read_file(tls.ca_file, "TLS CA");
  if (!tls.cert_file.empty()) {
    options.pem_cert_chain = read_file(tls.cert_file, "TLS certificate");
    options.pem_private_key = read_file(tls.key_file, "TLS key");
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> make_channel(const std::string &address, const TlsFiles &tls, int max_message_bytes) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(max_message_bytes);
  arguments.SetMaxSendMessageSize(max_message_bytes);
  // Notice a peer that has gone away even when no call is active.
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  if (tls.enabled() && !tls.server_name_override.empty()) {
    arguments.SetSslTargetNameOverride(tls.server_name_override);
  }
  return grpc::CreateCustomChannel(address, channel_credentials(tls), arguments);
}

}  // namespace kiln::rpc
