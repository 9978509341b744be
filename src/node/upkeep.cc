#include "node/upkeep.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bucket.h"
#include "quorate/log.h"

namespace quorate {
namespace {

constexpr auto kEtcdCallTimeout = std::chrono::seconds(2);
constexpr const char* kNotRunning = "etcd is not running";
constexpr const char* kNotAnsweredYet = "etcd has not answered yet";

}  // namespace

Upkeep::Upkeep(const Config& config, Metrics& metrics, UpkeepOptions options)
    : config_(config),
      metrics_(metrics),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()),
      ready_(Status::Unavailable(kNotAnsweredYet)),
      maintainer_(std::make_shared<Maintainer>(MaintenanceSettingsOf(config), clock_)) {
  if (!options_.etcd_clients) options_.etcd_clients = MakeEtcdClient;
  if (!options_.scale_target) options_.scale_target = ScaleTargetFromDiscovery(config);
  if (options_.scale_target) maintainer_->SetScaleTarget(options_.scale_target);
  metrics_.AddSection([maintainer = maintainer_] { return maintainer->RenderMetrics(); });
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) spdlog::error("upkeep will make no rounds: {}", Status::FromErrno(errno, "eventfd").message());
}

Upkeep::~Upkeep() {
  Stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void Upkeep::SetSelf(const Member& self, const std::vector<std::string>& peer_client_urls) {
  std::lock_guard lock(mu_);
  self_ = self;
  peer_clients_ = peer_client_urls;
  UseEndpointsLocked();
}

bool Upkeep::UseEndpointsLocked() {
  // The members the cluster listed last come first: the ones the caller named may have left it, and
  // it may hold voters they lack (one at an address discovery did not answer when the bucket was
  // written, or a node that joined from outside the discovered set); a learner reaches no leader but
  // through a voter, so without them it would never be promoted.
  std::vector<std::string> endpoints = listed_clients_;
  for (const auto& urls : {peer_clients_, self_.client_urls}) {
    for (const auto& url : urls) {
      if (std::find(endpoints.begin(), endpoints.end(), url) == endpoints.end()) endpoints.push_back(url);
    }
  }
  if (client_ != nullptr && SameUrlSet(endpoints, endpoints_)) return false;
  endpoints_ = std::move(endpoints);
  MakeClientLocked();
  return true;
}

OwnClientTls Upkeep::ClientTlsNow() const {
  const TlsFiles& tls = config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls;
  return rotation_ != nullptr ? rotation_->ClientTls(tls) : OwnClientTls{tls, ""};
}

void Upkeep::MakeClientLocked() {
  // During a CA rotation of the client side, the files its phase says (§14): etcd refuses, or serves a
  // leaf not verified by, the operator's files at some phase.
  OwnClientTls tls = ClientTlsNow();
  if (options_.tls != nullptr) client_tls_generation_ = options_.tls->generation();
  client_rotation_generation_ = tls.generation;
  EtcdClientOptions options{endpoints_, tls.files, kEtcdCallTimeout};
  options.cancel = cancel_;
  client_ = options_.etcd_clients(options);
}

void Upkeep::SetEtcdRunning(bool running) {
  std::lock_guard lock(mu_);
  etcd_running_ = running;
  // Not logged: the start or exit has its own line, and rounds log what they find from here on.
  ready_ = Status::Unavailable(running ? kNotAnsweredYet : kNotRunning);
}

void Upkeep::SetVersionChange(const std::string& change) {
  // A restart with nothing new must not drop a change whose end was not seen yet.
  if (change.empty()) return;
  std::lock_guard lock(mu_);
  version_change_ = change;
}

Status Upkeep::Ready() const {
  std::lock_guard lock(mu_);
  return ready_;
}

Status Upkeep::Tick() {
  Member self;
  std::shared_ptr<EtcdClient> client;
  {
    std::lock_guard lock(mu_);
    // The client read its certificate when made: after a renewal it presents the new one (§13), and
    // at each phase of a client CA rotation trusts and presents what that phase says (§14).
    if (client_ != nullptr &&
        ((options_.tls != nullptr && options_.tls->generation() != client_tls_generation_) ||
         ClientTlsNow().generation != client_rotation_generation_)) {
      MakeClientLocked();
    }
    self = self_;
    client = client_;
  }
  if (client == nullptr) return Status::Unavailable("no member to look after yet");
  auto status = client->EndpointStatusOf(self.client_urls.front());
  if (!status.ok()) return Status::Unavailable("etcd does not answer: " + status.status().message());
  {
    std::lock_guard lock(mu_);
    self_id_ = status->member_id;
  }
  // An alarm makes the member not ready, as etcd's own /health says; under NOSPACE alone the round
  // goes on all the same, so a learner is still promoted: a replacement waits for that voter, and
  // rule M3 may need it to defragment with a margin. Any other alarm (CORRUPT) stops the round.
  const Status alarmed = status->errors.empty()
                             ? Status::Ok()
                             : Status::Unavailable(fmt::format("etcd reports: {}", fmt::join(status->errors, "; ")));
  const bool nospace_only = std::all_of(status->errors.begin(), status->errors.end(),
                                        [](const std::string& e) { return e.find("NOSPACE") != std::string::npos; });
  if (!nospace_only) return alarmed;
  if (status->leader == 0) return Status::Unavailable("etcd has no leader");
  metrics_.SetIsLearner(status->is_learner);
  if (auto listing = client->MemberList(); listing.ok()) {
    metrics_.SetMembers(static_cast<int>(listing->members.size()));
    std::vector<std::string> listed;
    for (const auto& m : listing->members) {
      if (m.id != status->member_id) listed.insert(listed.end(), m.client_urls.begin(), m.client_urls.end());
    }
    {
      std::lock_guard lock(mu_);
      listed_clients_ = std::move(listed);
      if (UseEndpointsLocked()) {
        spdlog::info("upkeep of {} asks etcd at {}: the other members cluster {} lists first", self.name,
                     fmt::join(endpoints_, ","), IdToHex(listing->cluster_id));
      }
    }
    // The move to TLS changes them live (§14): what the flags said is carried as its phase says, or
    // this would undo the move.
    const std::vector<std::string> advertised =
        rotation_ != nullptr ? rotation_->AdvertisedPeerUrls(self.peer_urls) : self.peer_urls;
    for (const auto& m : listing->members) {
      if (m.id != status->member_id || SameUrlSet(m.peer_urls, advertised)) continue;
      Status s = client->MemberUpdate(m.id, advertised);
      spdlog::info("peer URLs of {} changed from {} to {}: MemberUpdate {}", self.name, fmt::join(m.peer_urls, ","),
                   fmt::join(advertised, ","), s.ok() ? "done" : "failed: " + s.message());
    }
  }
  if (status->is_learner) {
    Status s = client->MemberPromote(status->member_id);
    if (s.ok()) {
      spdlog::info("promoted {} ({}) from learner to voter: it caught up with the leader", self.name,
                   IdToHex(status->member_id));
      metrics_.SetIsLearner(false);
      return alarmed;
    }
    spdlog::debug("promotion of {} not yet: {}", self.name, s.message());
    return Status::Unavailable("learner, not yet promoted: " + s.message());
  }
  std::string change;
  {
    std::lock_guard lock(mu_);
    change.swap(version_change_);
  }
  if (!change.empty()) {
    spdlog::info("etcd of {} changed from {}: a healthy voter again, with a leader; it reports version {}",
                 self.name, change, status->version);
  }
  return alarmed;
}

void Upkeep::Maintain() {
  std::shared_ptr<EtcdClient> client;
  MemberId self = 0;
  {
    std::lock_guard lock(mu_);
    if (!etcd_running_ || client_ == nullptr || self_id_ == 0) return;
    client = client_;
    self = self_id_;
  }
  if (clock_.Now() - last_maintenance_ < options_.maintenance_interval) return;
  last_maintenance_ = clock_.Now();
  maintainer_->Round(*client, self);
}

void Upkeep::Rotate() {
  std::shared_ptr<EtcdClient> client;
  Member self;
  {
    std::lock_guard lock(mu_);
    if (rotation_ == nullptr || !etcd_running_ || client_ == nullptr) return;
    client = client_;
    self = self_;
  }
  if (clock_.Now() - last_rotation_ < options_.rotation_interval) return;
  last_rotation_ = clock_.Now();
  rotation_->Round(*client, self);
}

void Upkeep::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Upkeep::Stop() {
  if (cancel_->cancelled()) return;
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
  cancel_->Cancel();
  if (thread_.joinable()) thread_.join();
}

void Upkeep::Run() {
  if (stop_fd_ < 0) return;
  pollfd stop{stop_fd_, POLLIN, 0};
  while (true) {
    auto woken = clock_.Poll(std::span<pollfd>(&stop, 1), clock_.Now() + options_.interval);
    if (!woken.ok() || *woken > 0) return;
    bool running;
    {
      std::lock_guard lock(mu_);
      running = etcd_running_;
    }
    Status ready = running ? Tick() : Status::Unavailable(kNotRunning);
    // Stopped meanwhile: what the round found is its calls' cancellation, nothing to say or act on.
    if (cancel_->cancelled()) return;
    std::unique_lock lock(mu_);
    // A round that began before etcd exited must not put its answer back over the exit.
    if (!etcd_running_) ready = Status::Unavailable(kNotRunning);
    if (ready.message() != ready_.message()) {
      spdlog::info("readiness: {}", ready.ok() ? "ready (healthy voter)" : ready.message());
    }
    ready_ = std::move(ready);
    lock.unlock();
    if (options_.tls != nullptr) options_.tls->Round();
    // After readiness is set: a defragmentation takes long, and a probe must not wait on it.
    Maintain();
    if (cancel_->cancelled()) return;
    Rotate();
  }
}

std::vector<std::string> PeerClientUrls(const std::string& state_dir, const std::string& self_name) {
  std::vector<std::string> urls;
  auto bucket = LoadBucket(state_dir);
  if (!bucket.ok()) return urls;
  for (const auto& m : bucket->members.members()) {
    if (m.name == self_name) continue;
    urls.insert(urls.end(), m.client_urls.begin(), m.client_urls.end());
  }
  return urls;
}

}  // namespace quorate
