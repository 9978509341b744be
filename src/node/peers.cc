#include "node/peers.h"

#include <future>

#include "agent/agent.h"
#include "etcd/peer_probe.h"
#include "quorate/log.h"

namespace quorate {
namespace {

constexpr auto kPeerCallTimeout = std::chrono::milliseconds(1000);

class NetworkPeers : public Peers {
 public:
  explicit NetworkPeers(const Config& config)
      : self_name_(config.name), agent_port_(config.agent_port), peer_tls_(config.peer_tls) {}

  PeerFacts Ask(const Member& peer) override {
    PeerFacts facts{peer.name, {}, std::nullopt, {}, std::nullopt};
    auto url = ParseUrl(peer.peer_urls.front());
    // Two servers, asked at once: an agent slow to answer (its process busy, as when it opens a
    // restored database) then adds nothing to the peer URL's answers, which are all that a restart
    // on local data decides on (seen 0.58 s after a restore, asked one after the other).
    auto agent = std::async(std::launch::async, [&] {
      return AskAgent(AgentTarget(*url, agent_port_), self_name_, peer_tls_, kPeerCallTimeout);
    });
    for (const auto& u : peer.peer_urls) {
      auto view = Probe(u, kPeerCallTimeout);
      if (view.ok()) {
        facts.cluster = std::move(*view);
        facts.foreign_answer.clear();
        // The same etcd's version, for rule 6; one that does not say leaves it unknown.
        auto version = ProbeVersion(u, peer_tls_, kPeerCallTimeout);
        if (version.ok()) {
          facts.version = *version;
        } else {
          spdlog::debug("{}: {}", peer.name, version.status().message());
        }
        break;
      }
      if (!view.status().IsUnavailable()) facts.foreign_answer = view.status().message();
      spdlog::debug("{}: {}", peer.name, view.status().message());
    }
    facts.agent = agent.get();
    return facts;
  }

  Result<ClusterView> Probe(const std::string& peer_url, std::chrono::milliseconds timeout) override {
    return ProbeMembers(peer_url, peer_tls_, timeout);
  }

 private:
  std::string self_name_;
  int agent_port_;
  TlsFiles peer_tls_;
};

}  // namespace

std::unique_ptr<Peers> MakePeers(const Config& config) { return std::make_unique<NetworkPeers>(config); }

std::vector<PeerFacts> GatherFacts(Peers& peers, const MemberSet& expected, const std::string& self_name) {
  std::vector<std::future<PeerFacts>> asks;
  for (const auto& m : expected.members()) {
    if (m.name == self_name) continue;
    asks.push_back(std::async(std::launch::async, [&peers, m] { return peers.Ask(m); }));
  }
  std::vector<PeerFacts> facts;
  for (auto& f : asks) facts.push_back(f.get());
  return facts;
}

}  // namespace quorate
