#include "quorate/agent.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "agent.grpc.pb.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

namespace pb = quorate::agent::v1;

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

std::string Slurp(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : std::string();
}

class AgentService final : public pb::Agent::Service {
 public:
  explicit AgentService(std::function<AgentState()> state) : state_(std::move(state)) {}

  grpc::Status Describe(grpc::ServerContext*, const pb::DescribeRequest*, pb::DescribeResponse* out) override {
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
    return grpc::Status::OK;
  }

 private:
  std::function<AgentState()> state_;
};

}  // namespace

struct AgentServer::Impl {
  std::unique_ptr<AgentService> service;
  std::unique_ptr<grpc::Server> server;
};

Result<std::unique_ptr<AgentServer>> AgentServer::Start(const std::string& listen, const TlsFiles& peer_tls,
                                                        std::function<AgentState()> state) {
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (peer_tls.enabled()) {
    grpc::SslServerCredentialsOptions opts(peer_tls.client_cert_auth
                                               ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    opts.pem_root_certs = Slurp(peer_tls.trusted_ca_file);
    opts.pem_key_cert_pairs.push_back({Slurp(peer_tls.key_file), Slurp(peer_tls.cert_file)});
    creds = grpc::SslServerCredentials(opts);
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
  if (!impl->server || port == 0) {
    return Status::Unavailable(fmt::format("agent cannot listen on {} (address in use or not local?)", listen));
  }
  std::unique_ptr<AgentServer> server(new AgentServer());
  server->impl_ = std::move(impl);
  server->port_ = port;
  return server;
}

AgentServer::~AgentServer() {
  // A deadline, so a peer stuck in a call never holds up our exit.
  if (impl_ && impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
}

AgentReport AskAgent(const std::string& target, const std::string& from_name, const TlsFiles& peer_tls,
                     std::chrono::milliseconds timeout) {
  AgentReport report;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (peer_tls.enabled()) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = Slurp(peer_tls.trusted_ca_file);
    opts.pem_private_key = Slurp(peer_tls.key_file);
    opts.pem_cert_chain = Slurp(peer_tls.cert_file);
    creds = grpc::SslCredentials(opts);
  }
  grpc::ChannelArguments args;
  // One attempt per poll: the caller's loop is the retry.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  auto stub = pb::Agent::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  pb::DescribeRequest req;
  req.set_from_name(from_name);
  pb::DescribeResponse resp;
  grpc::Status st = stub->Describe(&ctx, req, &resp);
  if (!st.ok()) {
    // gRPC's UNAVAILABLE text is a multi-line trace; "not answering" is what the operator needs.
    report.error = st.error_code() == grpc::StatusCode::UNAVAILABLE
                       ? fmt::format("agent {} not answering", target)
                       : fmt::format("agent {}: {}", target, st.error_message());
    return report;
  }
  report.reachable = true;
  report.data_state = FromProto(resp.data_state());
  report.token = resp.cluster_token();
  report.expected_cluster_id = resp.cluster_id();
  return report;
}

std::string AgentTarget(const PeerUrl& peer, int agent_port) {
  bool v6 = peer.host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", peer.host, v6 ? "]" : "", agent_port);
}

}  // namespace quorate
