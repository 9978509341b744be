#include "testing/fake_peers.h"

namespace quorate {

void FakePeers::SetAgent(const std::string& name, const AgentReport& report) {
  std::lock_guard lock(mu_);
  agents_[name] = report;
}

void FakePeers::SetRunning(const std::string& peer_url, bool running) {
  std::lock_guard lock(mu_);
  if (running) {
    running_.insert(peer_url);
  } else {
    running_.erase(peer_url);
  }
}

void FakePeers::SetForeign(const std::string& peer_url, const std::string& answer) {
  std::lock_guard lock(mu_);
  foreign_[peer_url] = answer;
}

void FakePeers::SetStaleView(const std::string& peer_url, std::optional<ClusterView> view) {
  std::lock_guard lock(mu_);
  if (view) {
    stale_[peer_url] = std::move(*view);
  } else {
    stale_.erase(peer_url);
  }
}

void FakePeers::SetVersion(const std::string& name, const VersionAnswer& version) {
  std::lock_guard lock(mu_);
  versions_[name] = version;
}

int FakePeers::Asks() const {
  std::lock_guard lock(mu_);
  return asks_;
}

std::vector<std::string> FakePeers::Probed() const {
  std::lock_guard lock(mu_);
  return probed_;
}

PeerFacts FakePeers::Ask(const Member& peer) {
  PeerFacts facts{peer.name, {}, std::nullopt, {}, std::nullopt};
  {
    std::lock_guard lock(mu_);
    ++asks_;
    auto it = agents_.find(peer.name);
    facts.agent = it != agents_.end() ? it->second : AgentReport{false, "connection refused", DataState::kUnknown, "", 0};
  }
  for (const auto& url : peer.peer_urls) {
    auto view = Probe(url, std::chrono::seconds(1));
    if (view.ok()) {
      facts.cluster = std::move(*view);
      facts.foreign_answer.clear();
      std::lock_guard lock(mu_);
      if (auto it = versions_.find(peer.name); it != versions_.end()) facts.version = it->second;
      break;
    }
    if (!view.status().IsUnavailable()) facts.foreign_answer = view.status().message();
  }
  return facts;
}

Result<ClusterView> FakePeers::Probe(const std::string& peer_url, std::chrono::milliseconds) {
  std::lock_guard lock(mu_);
  probed_.push_back(peer_url);
  if (auto it = foreign_.find(peer_url); it != foreign_.end()) {
    return Status::InvalidArgument(peer_url + "/members answered " + it->second);
  }
  if (auto it = stale_.find(peer_url); it != stale_.end()) return it->second;
  if (cluster_ != nullptr && running_.count(peer_url)) return cluster_->View();
  return Status::Unavailable(peer_url + "/members: connection refused");
}

}  // namespace quorate
