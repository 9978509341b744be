#include "agent/agent.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <spdlog/spdlog.h>

#include "agent.grpc.pb.h"
#include "quorate/fs.h"
#include "quorate/text.h"

namespace quorate {
namespace {

namespace pb = quorate::agent::v1;

// Long enough for an in-flight Describe (a copy of a small struct) to finish, short enough that a
// peer stuck in a call never holds up our exit.
constexpr std::chrono::milliseconds kShutdownGrace(200);
// How often the served peer certificate files are read again: quorate renews them in place
// (docs/DESIGN.md §13) at two thirds of a life of at least 10 s.
constexpr unsigned kTlsRefreshSeconds = 1;

pb::DataState ToProto(DataState s) {
  switch (s) {
    case DataState::kEmpty:
      return pb::DATA_STATE_EMPTY;
    case DataState::kHasData:
      return pb::DATA_STATE_HAS_DATA;
    case DataState::kRunning:
      return pb::DATA_STATE_RUNNING;
    case DataState::kUnknown:
      break;
  }
  return pb::DATA_STATE_UNKNOWN;
}

// A newer peer may send a state we do not know: "unknown" keeps the planner waiting, never guessing.
DataState FromProto(pb::DataState s) {
  switch (s) {
    case pb::DATA_STATE_EMPTY:
      return DataState::kEmpty;
    case pb::DATA_STATE_HAS_DATA:
      return DataState::kHasData;
    case pb::DATA_STATE_RUNNING:
      return DataState::kRunning;
    default:
      return DataState::kUnknown;
  }
}

// The PEM contents of the peer TLS files, read once per server or call so that rotated
// certificates are picked up by the next call. Empty names stay empty.
struct Pem {
  std::string cert;
  std::string key;
  std::string ca;
};

Result<Pem> ReadPem(const TlsFiles& tls) {
  Pem pem;
  for (auto [path, out] : {std::pair{&tls.cert_file, &pem.cert}, std::pair{&tls.key_file, &pem.key},
                           std::pair{&tls.trusted_ca_file, &pem.ca}}) {
    if (path->empty()) continue;
    auto text = ReadFile(*path);
    if (!text.ok()) return Status::InvalidArgument(fmt::format("peer TLS: {}", text.status().message()));
    *out = std::move(*text);
  }
  return pem;
}

class AgentService final : public pb::Agent::Service {
 public:
  explicit AgentService(std::function<AgentState()> state) : state_(std::move(state)) {}

  grpc::Status Describe(grpc::ServerContext*, const pb::DescribeRequest* req, pb::DescribeResponse* out) override {
    spdlog::debug("agent: Describe from '{}'", req->from_name());
    AgentState s = state_();
    out->set_name(s.self.name);
    for (const auto& u : s.self.peer_urls) out->add_peer_urls(u);
    for (const auto& u : s.self.client_urls) out->add_client_urls(u);
    out->set_data_state(ToProto(s.data_state));
    out->set_cluster_token(s.token);
    out->set_cluster_id(s.cluster_id);
    out->set_member_id(s.member_id);
    out->set_version(QUORATE_VERSION);
    out->set_cluster_size(s.cluster_size);
    out->set_initial_cluster(s.initial_cluster);
    out->set_log_past_bootstrap(s.log_past_bootstrap);
    return grpc::Status::OK;
  }

 private:
  std::function<AgentState()> state_;
};

// gRPC's text reads "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.2:2382:
// Failed to connect to remote host: Connection refused". The end is the cause; the rest is gRPC's
// internals and the address the caller already names.
std::string Cause(const std::string& grpc_message) {
  std::string line = grpc_message.substr(0, grpc_message.find('\n'));
  size_t colon = line.rfind(": ");
  return colon == std::string::npos ? line : line.substr(colon + 2);
}

}  // namespace

struct AgentServer::Impl {
  // Declared before the server so that it outlives it: gRPC calls into it until Shutdown returns.
  std::unique_ptr<AgentService> service;
  std::unique_ptr<grpc::Server> server;
};

Result<std::unique_ptr<AgentServer>> AgentServer::Start(const std::string& listen, const TlsFiles& peer_tls,
                                                        std::function<AgentState()> state) {
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (peer_tls.enabled()) {
    if (peer_tls.cert_file.empty() || peer_tls.key_file.empty()) {
      return Status::InvalidArgument(
          fmt::format("agent on {}: peer TLS needs a certificate and a key to serve", listen));
    }
    if (peer_tls.client_cert_auth && peer_tls.trusted_ca_file.empty()) {
      return Status::InvalidArgument(
          fmt::format("agent on {}: peer client certificate auth needs a trusted CA file", listen));
    }
    // Read here only to refuse unusable files at once; the server itself watches them, so that a
    // renewed leaf is served from then on, as etcd serves it from its next handshake.
    auto pem = ReadPem(peer_tls);
    if (!pem.ok()) return pem.status().Prefixed(fmt::format("agent on {}", listen));
    auto files = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        peer_tls.key_file, peer_tls.cert_file, peer_tls.trusted_ca_file, kTlsRefreshSeconds);
    grpc::experimental::TlsServerCredentialsOptions opts(files);
    opts.watch_identity_key_cert_pairs();
    if (!peer_tls.trusted_ca_file.empty()) opts.watch_root_certs();
    opts.set_cert_request_type(peer_tls.client_cert_auth ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    creds = grpc::experimental::TlsServerCredentials(opts);
  }
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<AgentService>(std::move(state));
  int port = 0;
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second node on the same address would then share the
  // port silently, and peers would talk to whichever answered.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, creds, &port);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  // gRPC logs the bind error itself (to our debug log) and only hands back "no server".
  if (!impl->server || port == 0) {
    return Status::Unavailable(
        fmt::format("agent cannot listen on {} (address in use, not local, or not ip:port)", listen));
  }
  std::unique_ptr<AgentServer> server(new AgentServer());
  server->impl_ = std::move(impl);
  server->port_ = port;
  return server;
}

AgentServer::~AgentServer() {
  if (impl_ && impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
}

constexpr size_t kMaxTokenBytes = 1024;

AgentReport AskAgent(const std::string& target, const std::string& from_name, const TlsFiles& peer_tls,
                     std::chrono::milliseconds timeout) {
  AgentReport report;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (peer_tls.enabled()) {
    auto pem = ReadPem(peer_tls);
    if (!pem.ok()) {
      report.error = fmt::format("agent {}: {}", target, pem.status().message());
      return report;
    }
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = pem->ca;
    opts.pem_private_key = pem->key;
    opts.pem_cert_chain = pem->cert;
    creds = grpc::SslCredentials(opts);
  }
  grpc::ChannelArguments args;
  // One attempt per poll: the caller's loop is the retry, and it wants an answer, not a wait.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto stub = pb::Agent::NewStub(grpc::CreateCustomChannel(target, creds, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  // A peer that is down fails the call at once instead of holding it until the deadline.
  ctx.set_wait_for_ready(false);
  pb::DescribeRequest req;
  req.set_from_name(from_name);
  pb::DescribeResponse resp;
  grpc::Status st = stub->Describe(&ctx, req, &resp);
  if (!st.ok()) {
    spdlog::debug("agent {}: {}", target, st.error_message());
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      report.error = fmt::format("agent {} did not answer within {} ms", target, timeout.count());
    } else {
      // Over TLS a refused certificate shows only as "Socket closed": say which layer it was.
      report.error = fmt::format("agent {} not answering{}: {}", target, peer_tls.enabled() ? " over TLS" : "",
                                 Cause(st.error_message()));
    }
    return report;
  }
  return ReportFromAnswer(target, resp);
}

AgentState AnswerWithLog(AgentState& kept, const Result<bool>& past) {
  if (past.ok()) {
    kept.log_past_bootstrap = kept.log_past_bootstrap || *past;
    return kept;
  }
  AgentState answer = kept;
  if (!past.status().IsNotFound()) answer.log_past_bootstrap = true;
  return answer;
}

AgentReport ReportFromAnswer(const std::string& target, const agent::v1::DescribeResponse& resp) {
  AgentReport report;
  // The token is compared and shown in reasons; a peer cannot slip a line break into either.
  if (!IsPrintable(resp.cluster_token()) || resp.cluster_token().size() > kMaxTokenBytes) {
    report.error = fmt::format("agent {} sent a cluster token that is not printable text: '{}'", target,
                               Printable(resp.cluster_token(), 64));
    return report;
  }
  report.reachable = true;
  report.data_state = FromProto(resp.data_state());
  report.token = resp.cluster_token();
  report.expected_cluster_id = resp.cluster_id();
  report.log_past_bootstrap = resp.log_past_bootstrap();
  return report;
}

AgentReport ReportFromWireForTest(const std::string& target, std::string_view bytes) {
  pb::DescribeResponse answer;
  if (!answer.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    AgentReport report;
    report.error = fmt::format("agent {} sent an answer that is not a DescribeResponse", target);
    return report;
  }
  return ReportFromAnswer(target, answer);
}

std::string AgentTarget(const PeerUrl& peer, int agent_port) {
  bool v6 = peer.host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", peer.host, v6 ? "]" : "", agent_port);
}

}  // namespace quorate
