#include "node/apply.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "etcd/etcd_errors.h"
#include "quorate/log.h"

namespace quorate {

const char kMajorityMayBeLost[] =
    "a majority of the cluster may be lost (a member that was removed without learning it still answers as a "
    "voter): check `quorate member list` on every member; if their data is gone for good, `quorate recover` from a "
    "survivor or `quorate run --restore-from` a backup brings the cluster back";
namespace {

constexpr auto kPeerCallTimeout = std::chrono::milliseconds(1000);
constexpr auto kEtcdCallTimeout = std::chrono::seconds(5);
constexpr auto kRetryFirst = std::chrono::milliseconds(500);
constexpr auto kRetryMax = std::chrono::milliseconds(4000);
constexpr auto kSayAgain = std::chrono::seconds(5);

// etcd 3.4, started `new` without a WAL, first asks the other members' peer URLs in sorted order,
// one second each, whether it was bootstrapped already (isMemberBootstrapped), and only then serves
// its own peer URL. An etcd busy with that check has its peer port open and answers nothing, so N
// etcds started at the same moment wait up to N-1 seconds for one another. Hence only the member
// owning the smallest peer URL (the first one every other etcd asks) starts at once; the others
// start once it answers GET /members, which takes its etcd milliseconds, as no peer etcd listens
// yet. Only the start is delayed, never the decision; after kFirstPeerWait this member starts anyway.
constexpr auto kFirstPeerWait = std::chrono::seconds(5);
constexpr auto kFirstPeerPoll = std::chrono::milliseconds(20);
constexpr auto kFirstPeerCallTimeout = std::chrono::milliseconds(200);

}  // namespace

Backoff::Outcome WaitOrStop(Backoff& backoff, const StopSource& stop) {
  while (true) {
    Backoff::Outcome outcome = backoff.Wait();
    if (outcome != Backoff::kStopped || !stop.requested || stop.requested()) return outcome;
  }
}

Result<bool> IsAddressOfThisMachine(const PeerUrl& url) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url.host.c_str(), nullptr, &hints, &found); rc != 0) {
    return Status::Unavailable(fmt::format("peer URL {}: cannot resolve {}: {}", url.text, url.host, gai_strerror(rc)));
  }
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, a->ai_addr, a->ai_addrlen);
    // Port 0: only whether the address is ours matters, not whether etcd's port is free.
    if (a->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(&addr)->sin_port = 0;
    if (a->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = 0;
    local = bind(fd, reinterpret_cast<sockaddr*>(&addr), a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(found);
  return local;
}

Status CheckPeerUrlIsOurs(const ApplySeams& seams, const Member& self) {
  for (const auto& text : self.peer_urls) {
    auto url = ParseUrl(text);
    if (!url.ok()) return url.status();
    auto local = seams.is_own_address(*url);
    if (!local.ok()) return local.status();
    if (!*local) {
      return Status::InvalidArgument(fmt::format(
          "peer URL {} does not name an address of this machine; adding it would give the cluster a member that "
          "can never connect",
          text));
    }
    if (auto view = seams.peers.Probe(text, kPeerCallTimeout); view.ok() || !view.status().IsUnavailable()) {
      return Status::FailedPrecondition(
          fmt::format("something already answers at peer URL {}; refusing to add a member there", text));
    }
  }
  return Status::Ok();
}

Result<MembershipChange> ApplyMembershipChange(const ApplySeams& seams, const TlsFiles& client_tls,
                                               const Member& self, const Decision& d, Clock::TimePoint deadline) {
  auto client = seams.etcd_clients({d.endpoints, client_tls, kEtcdCallTimeout});
  Backoff backoff(seams.clock, kRetryFirst, kRetryMax, deadline, seams.stop.fd);
  // etcd's "unhealthy cluster" clears by itself, within 5 s of the member it asked connecting to its
  // last peer: asked again at a fixed interval, not the doubling backoff (kUnhealthyClusterRetry).
  Backoff unhealthy(seams.clock, kUnhealthyClusterRetry, kUnhealthyClusterRetry, deadline, seams.stop.fd);
  // How far the change got, for a stop: the operator must hear when it is left half done.
  std::string progress = "no membership change was made yet";
  // A wait's line is said once per answer, and again every kSayAgain while it lasts: a refusal
  // asked again twice a second until --timeout (a voter down) would fill the log.
  std::string said;
  Clock::TimePoint said_at{};
  auto retry = [&](const Status& s, const char* what) -> Status {
    if (!s.IsUnavailable()) return s;
    const bool transient = s.reason() == Reason::kUnhealthyCluster;
    if (s.message() != said || seams.clock.Now() - said_at >= kSayAgain) {
      spdlog::info("waiting to {}: {}{}", what, s.message(),
                   transient ? fmt::format(" (asked again every {} ms while it lasts)", kUnhealthyClusterRetry.count())
                             : "");
      said = s.message();
      said_at = seams.clock.Now();
    }
    switch (WaitOrStop(transient ? unhealthy : backoff, seams.stop)) {
      case Backoff::kRetry:
        return Status::Ok();
      case Backoff::kDeadline:
        if (d.remove_id) {
          // The decision counted a quorum among the voters that answered, yet none commits: one of
          // them may be a member removed without ever learning it (no quorum reached it), whose view
          // still lists it as a voter. Then the voters that hold data are fewer than a quorum.
          return Status::DeadlineExceeded(fmt::format("timed out after --timeout waiting to {}: {}; no quorum commits "
                                                      "the removal, so {}",
                                                      what, s.message(), kMajorityMayBeLost))
              .With(Reason::kNoQuorumCommits);
        }
        return Status::DeadlineExceeded(fmt::format("timed out after --timeout waiting to {}: {}", what, s.message()));
      case Backoff::kStopped:
        break;
    }
    return Status::Cancelled(fmt::format("stopped while waiting to {} ({}): {}", what, ActionName(d.action), progress));
  };

  if (d.remove_id) {
    if (seams.before_remove) seams.before_remove(*client);
    while (true) {
      Status s = client->MemberRemove(*d.remove_id);
      if (s.IsNotFound()) {
        // Gone: another newcomer may have taken that seat (rule 9), and adding ourselves beside it
        // would grow the cluster past its size (a departed member left in it for good). After a try
        // that failed it may as well be our own removal, committed as the call failed: which one,
        // only the membership now tells, so decide again on it (simulator seed 2003981 of 5 nodes).
        return Status::Unavailable(fmt::format("member {} was already removed (another node may have taken its "
                                               "seat); deciding again",
                                               IdToHex(*d.remove_id)))
            .With(Reason::kStaleDecision);
      }
      if (s.ok()) {
        spdlog::info("removed stale member {} to add {} in its place", IdToHex(*d.remove_id), self.name);
        progress = fmt::format(
            "a membership change is half done: member {} was removed and {} is not added yet; the next start of "
            "quorate here adds it",
            IdToHex(*d.remove_id), self.name);
        break;
      }
      if (Status r = retry(s, "remove the stale member"); !r.ok()) return r;
    }
  }
  Result<MemberListing> listing = Status::Internal("unset");
  if (d.add_member) {
    if (Status s = CheckPeerUrlIsOurs(seams, self); !s.ok()) return s;
    // MemberAdd checks no size, and the seat the decision saw free may be gone by now: another node
    // added itself (rule 2) while ours was refused and retried ("too many learner members", "unhealthy
    // cluster"). So every try first reads the membership with quorum, and one that lists us already
    // (an earlier try or run got through) or fills --cluster-size adds nothing.
    bool refused_as_existing = false;
    while (true) {
      listing = client->MemberListLinearizable();
      if (!listing.ok()) {
        if (Status r = retry(listing.status(), "read the membership before adding this member"); !r.ok()) return r;
        continue;
      }
      auto ours = std::find_if(listing->members.begin(), listing->members.end(),
                               [&](const ClusterMember& m) { return SharesUrl(m.peer_urls, self.peer_urls); });
      if (ours != listing->members.end()) {
        // Added already, unless the member at our peer URL has started: then it is our old self,
        // whose data is gone, and the decision was made on a view that lacked it (a peer still
        // replaying its WAL); starting etcd as that member with an empty data dir would crash it,
        // so decide again (rule 4 replaces it).
        if (ours->started()) {
          return Status::Unavailable(fmt::format(
              "the cluster lists {} as started member {}, which the decision's view lacked; deciding again",
              self.name, IdToHex(ours->id))).With(Reason::kStaleDecision);
        }
        break;
      }
      // Refused as existing, yet not listed: the answer below says the cluster lacks us.
      if (refused_as_existing) break;
      if (listing->members.size() >= d.cluster_size) {
        return Status::Unavailable(fmt::format("cluster {} has {} members since the decision, --cluster-size {}, "
                                               "and does not list {}: another node took the seat; deciding again",
                                               IdToHex(listing->cluster_id), listing->members.size(),
                                               d.cluster_size, self.name))
            .With(Reason::kStaleDecision);
      }
      MemberId added = 0;
      listing = client->MemberAdd(self.peer_urls, /*is_learner=*/true, &added);
      if (listing.ok()) {
        spdlog::info("added {} as learner {}", self.name, IdToHex(added));
        break;
      }
      // An earlier run added us and was killed before starting etcd: the read above says as what.
      if (listing.status().code() == Status::Code::kFailedPrecondition) {
        refused_as_existing = true;
        continue;
      }
      if (Status r = retry(listing.status(), "add this member as a learner"); !r.ok()) return r;
    }
  } else {
    progress = fmt::format("{} is already a member; its etcd starts on the next start of quorate here", self.name);
    // Read with quorum: the view that showed our added member unstarted may be a peer's that lags,
    // and if it has started since (this node then lost its data), an empty data dir must not start
    // as it (simulator seed 40 of 3 nodes); rule 4 replaces it.
    while (!(listing = client->MemberListLinearizable()).ok()) {
      if (Status r = retry(listing.status(), "read the membership before starting as the added member"); !r.ok()) {
        return r;
      }
    }
    for (const auto& m : listing->members) {
      if (!SharesUrl(m.peer_urls, self.peer_urls) || !m.started()) continue;
      return Status::Unavailable(fmt::format("the cluster lists {} as started member {}, which the decision's view "
                                             "showed never started; deciding again",
                                             self.name, IdToHex(m.id)))
          .With(Reason::kStaleDecision);
    }
  }
  MembershipChange change;
  std::vector<Member> entries;
  for (const auto& m : listing->members) {
    bool is_self = SharesUrl(m.peer_urls, self.peer_urls);
    if (is_self) change.member_id = m.id;
    std::string name = is_self ? self.name : (m.name.empty() ? IdToHex(m.id) : m.name);
    entries.push_back({name, m.peer_urls, {}});
  }
  if (change.member_id == 0) {
    return Status::Unavailable(fmt::format("the cluster does not list {} after MemberAdd; run init again", self.name));
  }
  change.initial_cluster = InitialClusterOf(entries);
  return change;
}

Status WaitForFirstPeer(const ApplySeams& seams, const MemberSet& expected, const Member& self) {
  const std::string* first = nullptr;
  for (const auto& m : expected.members()) {
    for (const auto& u : m.peer_urls) {
      if (first == nullptr || u < *first) first = &u;
    }
  }
  if (first == nullptr || std::find(self.peer_urls.begin(), self.peer_urls.end(), *first) != self.peer_urls.end()) {
    return Status::Ok();
  }
  spdlog::info("starting etcd once {} answers: it is the first peer URL every new etcd asks", *first);
  Backoff backoff(seams.clock, kFirstPeerPoll, kFirstPeerPoll, seams.clock.Now() + kFirstPeerWait, seams.stop.fd);
  while (!seams.peers.Probe(*first, kFirstPeerCallTimeout).ok()) {
    switch (WaitOrStop(backoff, seams.stop)) {
      case Backoff::kRetry:
        break;
      case Backoff::kDeadline:
        spdlog::info("{} does not answer after {}s: starting etcd anyway", *first, kFirstPeerWait.count());
        return Status::Ok();
      case Backoff::kStopped:
        return Status::Cancelled(fmt::format("stopped while waiting for {} to answer before starting a new cluster; "
                                             "no membership change was under way",
                                             *first));
    }
  }
  return Status::Ok();
}

}  // namespace quorate
