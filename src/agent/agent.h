// The agent (docs/DESIGN.md §6): a small gRPC service through which a node tells its peers, before any
// etcd quorum exists, who it is, what data it holds and which member set it discovered. The
// planner's rule "every expected member is empty and agrees" is read through it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "quorate/member.h"
#include "core/cluster.h"
#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {
namespace agent::v1 {
class DescribeResponse;
}

struct AgentState {
  Member self;
  DataState data_state = DataState::kUnknown;
  std::string token;
  ClusterId cluster_id = 0;  // of the member set this node discovered
  MemberId member_id = 0;
  uint32_t cluster_size = 0;
  std::string initial_cluster;
  bool log_past_bootstrap = false;  // see AgentReport
};

// What the agent answers about its log, given the last read of the WAL (`past`: whether it holds an
// entry of a term past the bootstrap's). A log only grows, so a read saying so is kept in `kept` and
// the WAL is not read again. Only what the log says is kept: an etcd just launched on empty data has
// written no WAL yet (NotFound: no entry, so not past the bootstrap), and a log that cannot be read
// now is answered as past, the side that makes a peer wait, but read again at the next ask. Keeping
// that answer made a late peer wait for ever, as if a majority were lost (CI, member-remove).
AgentState AnswerWithLog(AgentState& kept, const Result<bool>& past);

class AgentServer {
 public:
  // Listens on `listen` ("ip:port"; port 0 picks one). `state` is called on every Describe, from
  // gRPC's threads, so it must be thread-safe. With peer TLS the agent serves the peer certificate
  // and, with client_cert_auth, accepts only clients whose certificate the trusted CA signed.
  // Unusable TLS files are InvalidArgument; an address it cannot bind is Unavailable naming it.
  static Result<std::unique_ptr<AgentServer>> Start(const std::string& listen, const TlsFiles& peer_tls,
                                                     std::function<AgentState()> state);
  // Gives in-flight calls a short grace, then cancels them, so a slow peer never holds it up (a
  // `state` call already running is still waited for: it must not block). `state` is not called
  // once it returns.
  ~AgentServer();
  int port() const { return port_; }

 private:
  struct Impl;
  AgentServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// A peer agent's Describe answer as a report, checked: the border where its words come in (a token
// that is not printable text makes the agent count as unreachable, with the reason).
AgentReport ReportFromAnswer(const std::string& target, const agent::v1::DescribeResponse& answer);
// The same from the answer's protobuf bytes, for the fuzz target (the generated header is private
// to the library); bytes that are not a DescribeResponse make an unreachable report.
AgentReport ReportFromWireForTest(const std::string& target, std::string_view bytes);

// Never fails: an agent that cannot be asked within `timeout` is a report with reachable=false and
// a one-line reason naming `target`. With peer TLS it presents the peer certificate (mTLS).
AgentReport AskAgent(const std::string& target, const std::string& from_name, const TlsFiles& peer_tls,
                     std::chrono::milliseconds timeout);

// Where a peer's agent listens: the host of its peer URL (IPv6 in brackets) and the agent port.
std::string AgentTarget(const PeerUrl& peer, int agent_port);

}  // namespace quorate
