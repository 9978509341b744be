#include "testing/fake_etcd.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace quorate {
namespace {

// A client of the shared membership, as the factory hands it out.
class SharedClient : public EtcdClient {
 public:
  explicit SharedClient(FakeEtcdClient& cluster) : cluster_(cluster) {}
  Result<MemberListing> MemberList() override { return cluster_.MemberList(); }
  Result<MemberListing> MemberListLinearizable() override { return cluster_.MemberListLinearizable(); }
  Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                  MemberId* added) override {
    return cluster_.MemberAdd(peer_urls, is_learner, added);
  }
  Status MemberRemove(MemberId id) override { return cluster_.MemberRemove(id); }
  Status MemberPromote(MemberId id) override { return cluster_.MemberPromote(id); }
  Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) override {
    return cluster_.MemberUpdate(id, peer_urls);
  }
  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    return cluster_.EndpointStatusOf(endpoint);
  }
  Status Put(const std::string& key, const std::string& value) override { return cluster_.Put(key, value); }
  Result<std::optional<std::string>> Get(const std::string& key) override { return cluster_.Get(key); }
  Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override { return cluster_.GetPrefix(prefix); }
  Result<bool> PutIfAbsent(const std::string& key, const std::string& value) override {
    return cluster_.PutIfAbsent(key, value);
  }
  Result<std::vector<EtcdAlarm>> AlarmList() override { return cluster_.AlarmList(); }
  Status AlarmDisarm(const EtcdAlarm& alarm) override { return cluster_.AlarmDisarm(alarm); }
  Status Compact(int64_t revision) override { return cluster_.Compact(revision); }
  Status Defragment(const std::string& endpoint, std::chrono::milliseconds timeout) override {
    return cluster_.Defragment(endpoint, timeout);
  }

 private:
  FakeEtcdClient& cluster_;
};

}  // namespace

FakeEtcdClient::FakeEtcdClient(ClusterId cluster_id) : cluster_id_(cluster_id) {}

void FakeEtcdClient::AddStarted(MemberId id, const std::string& name, const std::vector<std::string>& peer_urls,
                                const std::vector<std::string>& client_urls, bool is_learner) {
  std::lock_guard lock(mu_);
  members_.push_back({id, name, peer_urls, client_urls, is_learner});
}

void FakeEtcdClient::AddUnstarted(MemberId id, const std::vector<std::string>& peer_urls, bool is_learner) {
  std::lock_guard lock(mu_);
  members_.push_back({id, "", peer_urls, {}, is_learner});
}

void FakeEtcdClient::Start(MemberId id, const std::string& name, const std::vector<std::string>& client_urls) {
  std::lock_guard lock(mu_);
  auto it = FindLocked(id);
  if (it == members_.end()) return;
  it->name = name;
  it->client_urls = client_urls;
}

void FakeEtcdClient::SetCaughtUp(MemberId id, bool caught_up) {
  std::lock_guard lock(mu_);
  if (caught_up) {
    caught_up_.insert(id);
  } else {
    caught_up_.erase(id);
  }
}

void FakeEtcdClient::FailAddsUnhealthy(int n) {
  std::lock_guard lock(mu_);
  unhealthy_adds_ = n;
}

void FakeEtcdClient::RefuseChangesUnhealthyUntil(Clock& clock, Clock::TimePoint until) {
  std::lock_guard lock(mu_);
  unhealthy_clock_ = &clock;
  unhealthy_until_ = until;
}

bool FakeEtcdClient::UnhealthyLocked() const {
  return unhealthy_clock_ != nullptr && unhealthy_clock_->Now() < unhealthy_until_;
}

void FakeEtcdClient::TimeOutNextRemove(std::function<void()> meanwhile) {
  std::lock_guard lock(mu_);
  remove_timeout_ = std::move(meanwhile);
}

void FakeEtcdClient::AfterChange(std::function<void(const std::string&)> hook) {
  std::lock_guard lock(mu_);
  after_ = std::move(hook);
}

ClusterView FakeEtcdClient::View() const {
  std::lock_guard lock(mu_);
  return {cluster_id_, members_};
}

std::vector<ClusterMember> FakeEtcdClient::Members() const {
  std::lock_guard lock(mu_);
  return members_;
}

std::vector<std::string> FakeEtcdClient::Calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

int FakeEtcdClient::CountCalls(const std::string& method) const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count_if(calls_.begin(), calls_.end(), [&](const std::string& c) {
    return c.compare(0, method.size(), method) == 0 && (c.size() == method.size() || c[method.size()] == ' ');
  }));
}

EtcdClientFactory FakeEtcdClient::Factory() {
  return [this](const EtcdClientOptions& options) -> std::unique_ptr<EtcdClient> {
    {
      std::lock_guard lock(mu_);
      clients_.push_back(options);
    }
    return std::make_unique<SharedClient>(*this);
  };
}

int FakeEtcdClient::ClientsMade() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(clients_.size());
}

std::vector<EtcdClientOptions> FakeEtcdClient::ClientOptions() const {
  std::lock_guard lock(mu_);
  return clients_;
}

void FakeEtcdClient::Record(std::string call) {
  std::lock_guard lock(mu_);
  calls_.push_back(std::move(call));
}

void FakeEtcdClient::After(const std::string& call) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard lock(mu_);
    hook = after_;
  }
  if (hook) hook(call);
}

MemberListing FakeEtcdClient::ListingLocked() const {
  MemberListing listing{cluster_id_, 0, members_};
  for (const auto& m : members_) {
    if (!m.is_learner && m.started()) {
      listing.answered_by = m.id;
      break;
    }
  }
  return listing;
}

std::vector<ClusterMember>::iterator FakeEtcdClient::FindLocked(MemberId id) {
  return std::find_if(members_.begin(), members_.end(), [&](const ClusterMember& m) { return m.id == id; });
}

Result<MemberListing> FakeEtcdClient::MemberList() {
  Record("MemberList");
  std::lock_guard lock(mu_);
  return ListingLocked();
}

Result<MemberListing> FakeEtcdClient::MemberListLinearizable() {
  Record("MemberListLinearizable");
  std::lock_guard lock(mu_);
  if (!has_quorum_) return Status::Unavailable("Range: etcdserver: no leader");
  return ListingLocked();
}

void FakeEtcdClient::SetQuorum(bool has_quorum) {
  std::lock_guard lock(mu_);
  has_quorum_ = has_quorum;
}

Result<MemberListing> FakeEtcdClient::MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                                MemberId* added) {
  Record(fmt::format("MemberAdd {}{}", is_learner ? "learner " : "", fmt::join(peer_urls, ",")));
  MemberListing listing;
  {
    std::lock_guard lock(mu_);
    if (unhealthy_adds_ > 0 || UnhealthyLocked()) {
      if (unhealthy_adds_ > 0) --unhealthy_adds_;
      return Status::Unavailable("etcdserver: unhealthy cluster").With(Reason::kUnhealthyCluster);
    }
    for (const auto& m : members_) {
      if (SharesUrl(m.peer_urls, peer_urls)) return Status::FailedPrecondition("etcdserver: Peer URLs already exists");
    }
    // etcd 3.4 allows one learner at a time.
    if (is_learner && std::any_of(members_.begin(), members_.end(), [](const ClusterMember& m) { return m.is_learner; })) {
      return Status::Unavailable("etcdserver: too many learner members in cluster");
    }
    // etcd mixes the time into an added member's ID; a counter does as well for a fake.
    MemberId id = ComputeMemberId(peer_urls, fmt::format("added-{}", ++adds_));
    members_.push_back({id, "", peer_urls, {}, is_learner});
    if (added != nullptr) *added = id;
    listing = ListingLocked();
  }
  After("MemberAdd");
  return listing;
}

Status FakeEtcdClient::MemberRemove(MemberId id) {
  Record(fmt::format("MemberRemove {}", IdToHex(id)));
  std::function<void()> timeout;
  {
    std::lock_guard lock(mu_);
    timeout = std::exchange(remove_timeout_, nullptr);
  }
  if (timeout) {
    timeout();
    return Status::Unavailable("etcdserver: request timed out");
  }
  {
    std::lock_guard lock(mu_);
    auto it = FindLocked(id);
    if (it == members_.end()) return Status::NotFound("etcdserver: member not found");
    if (!it->is_learner && UnhealthyLocked()) {
      return Status::Unavailable("etcdserver: unhealthy cluster").With(Reason::kUnhealthyCluster);
    }
    members_.erase(it);
  }
  After("MemberRemove");
  return Status::Ok();
}

Status FakeEtcdClient::MemberPromote(MemberId id) {
  Record(fmt::format("MemberPromote {}", IdToHex(id)));
  {
    std::lock_guard lock(mu_);
    auto it = FindLocked(id);
    if (it == members_.end()) return Status::NotFound("etcdserver: member not found");
    if (!it->is_learner) return Status::FailedPrecondition("etcdserver: can only promote a learner member");
    if (!caught_up_.count(id)) {
      return Status::Unavailable("etcdserver: can only promote a learner member which is in sync with leader");
    }
    it->is_learner = false;
  }
  After("MemberPromote");
  return Status::Ok();
}

Status FakeEtcdClient::MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) {
  Record(fmt::format("MemberUpdate {} {}", IdToHex(id), fmt::join(peer_urls, ",")));
  {
    std::lock_guard lock(mu_);
    auto it = FindLocked(id);
    if (it == members_.end()) return Status::NotFound("etcdserver: member not found");
    for (const auto& m : members_) {
      if (m.id != id && SharesUrl(m.peer_urls, peer_urls)) {
        return Status::FailedPrecondition("etcdserver: Peer URLs already exists");
      }
    }
    it->peer_urls = peer_urls;
  }
  After("MemberUpdate");
  return Status::Ok();
}

Result<EndpointStatus> FakeEtcdClient::EndpointStatusOf(const std::string& endpoint) {
  Record("EndpointStatus " + endpoint);
  std::lock_guard lock(mu_);
  MemberListing listing = ListingLocked();
  for (const auto& m : members_) {
    if (std::find(m.client_urls.begin(), m.client_urls.end(), endpoint) == m.client_urls.end()) continue;
    EndpointStatus st;
    st.endpoint = endpoint;
    st.member_id = m.id;
    st.leader = listing.answered_by;
    st.is_learner = m.is_learner;
    st.revision = revision_;
    if (auto db = databases_.find(m.id); db != databases_.end()) {
      st.db_size = db->second.size;
      st.db_size_in_use = db->second.in_use;
    }
    // Every alarm of the cluster, as etcd's Status lists them, a removed member's too.
    for (const EtcdAlarm& a : alarms_) {
      st.errors.push_back(fmt::format("memberID:{} alarm:{}", a.member_id, AlarmName(a.kind)));
    }
    return st;
  }
  return Status::Unavailable(endpoint + ": connection refused");
}

// Keys as quorate's records use them (rule M6's, the rolling changes'): through the leader, so
// refused without quorum, as linearizable reads and writes are.
Status FakeEtcdClient::Put(const std::string& key, const std::string& value) {
  Record("Put " + key);
  std::lock_guard lock(mu_);
  if (!has_quorum_) return Status::Unavailable("Put: etcdserver: request timed out").With(Reason::kOutcomeUnknown);
  keys[key] = value;
  return Status::Ok();
}

Result<std::optional<std::string>> FakeEtcdClient::Get(const std::string& key) {
  Record("Get " + key);
  std::lock_guard lock(mu_);
  if (!has_quorum_) return Status::Unavailable("Range: etcdserver: no leader");
  auto it = keys.find(key);
  return it == keys.end() ? std::optional<std::string>() : std::optional(it->second);
}

Result<std::vector<KeyValue>> FakeEtcdClient::GetPrefix(const std::string& prefix) {
  Record("GetPrefix " + prefix);
  std::lock_guard lock(mu_);
  if (!has_quorum_) return Status::Unavailable("Range: etcdserver: no leader");
  std::vector<KeyValue> out;
  for (const auto& [k, v] : keys) {
    if (k.rfind(prefix, 0) == 0) out.push_back({k, v, 1});
  }
  return out;
}

Result<bool> FakeEtcdClient::PutIfAbsent(const std::string& key, const std::string& value) {
  Record("PutIfAbsent " + key);
  std::lock_guard lock(mu_);
  if (!has_quorum_) return Status::Unavailable("Txn: etcdserver: request timed out").With(Reason::kOutcomeUnknown);
  return keys.emplace(key, value).second;
}

void FakeEtcdClient::SetDatabase(MemberId id, int64_t size, int64_t in_use) {
  std::lock_guard lock(mu_);
  databases_[id] = {size, in_use};
}

void FakeEtcdClient::SetRevision(int64_t revision) {
  std::lock_guard lock(mu_);
  revision_ = revision;
}

void FakeEtcdClient::RaiseAlarm(const EtcdAlarm& alarm) {
  std::lock_guard lock(mu_);
  alarms_.push_back(alarm);
}

std::vector<EtcdAlarm> FakeEtcdClient::Alarms() const {
  std::lock_guard lock(mu_);
  return alarms_;
}

int64_t FakeEtcdClient::CompactedRevision() const {
  std::lock_guard lock(mu_);
  return compacted_;
}

Result<std::vector<EtcdAlarm>> FakeEtcdClient::AlarmList() {
  Record("AlarmList");
  std::lock_guard lock(mu_);
  return alarms_;
}

Status FakeEtcdClient::AlarmDisarm(const EtcdAlarm& alarm) {
  Record(fmt::format("AlarmDisarm {} {}", AlarmName(alarm.kind), IdToHex(alarm.member_id)));
  std::lock_guard lock(mu_);
  std::erase_if(alarms_, [&](const EtcdAlarm& a) { return a.member_id == alarm.member_id && a.kind == alarm.kind; });
  return Status::Ok();
}

Status FakeEtcdClient::Compact(int64_t revision) {
  Record(fmt::format("Compact {}", revision));
  std::lock_guard lock(mu_);
  if (revision <= compacted_) {
    return Status::FailedPrecondition("etcdserver: mvcc: required revision has been compacted")
        .With(Reason::kCompacted);
  }
  compacted_ = revision;
  return Status::Ok();
}

Status FakeEtcdClient::Defragment(const std::string& endpoint, std::chrono::milliseconds) {
  Record("Defragment " + endpoint);
  std::lock_guard lock(mu_);
  for (const auto& m : members_) {
    if (std::find(m.client_urls.begin(), m.client_urls.end(), endpoint) == m.client_urls.end()) continue;
    if (auto db = databases_.find(m.id); db != databases_.end()) db->second.size = db->second.in_use;
    return Status::Ok();
  }
  return Status::Unavailable("Defragment: no member at " + endpoint);
}


}  // namespace quorate
