#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "cli/output.h"
#include "etcd/etcd_errors.h"
#include "node/member_remove.h"
#include "testing/fake_clock.h"

namespace quorate {
namespace {

constexpr ClusterId kCluster = 0xc1;

ClusterMember Voter(int k, bool started = true) {
  ClusterMember m;
  m.id = 0x100 + k;
  m.name = started ? "n" + std::to_string(k) : "";
  m.peer_urls = {"http://127.0.0." + std::to_string(k) + ":2380"};
  if (started) m.client_urls = {"http://127.0.0." + std::to_string(k) + ":2379"};
  return m;
}

ClusterMember Learner(int k) {
  ClusterMember m = Voter(k);
  m.is_learner = true;
  return m;
}

MemberListing Listing(std::vector<ClusterMember> members) { return MemberListing{kCluster, 0x101, std::move(members)}; }

MemberListing Voters(int n) {
  std::vector<ClusterMember> members;
  for (int k = 1; k <= n; ++k) members.push_back(Voter(k));
  return Listing(members);
}

// Every voter of `listing` healthy except those numbered in `down`.
VoterHealth HealthyBut(const MemberListing& listing, std::set<int> down = {}) {
  VoterHealth h;
  for (const auto& m : listing.members) {
    h[m.id] = down.count(static_cast<int>(m.id - 0x100)) ? Status::Unavailable("not answering") : Status::Ok();
  }
  return h;
}

TEST_CASE("member remove resolves names and hex IDs against the listing, in the order given") {
  auto listing = Voters(5);
  auto r = ResolveRemoval(listing, {"n5", "104", "0x0"}, /*ignore_not_found=*/true);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0].member->id == 0x105);
  CHECK((*r)[1].member->id == 0x104);
  CHECK((*r)[1].arg == "104");
  CHECK_FALSE((*r)[2].member.has_value());

  SUBCASE("an unstarted member has no name yet: its ID finds it") {
    auto l = Listing({Voter(1), Voter(2), Voter(3, /*started=*/false)});
    auto u = ResolveRemoval(l, {"103"}, false);
    REQUIRE(u.ok());
    CHECK(u->front().member->id == 0x103);
  }
  SUBCASE("a name wins over an ID that reads the same") {
    ClusterMember odd = Voter(3);
    odd.name = "101";
    auto u = ResolveRemoval(Listing({Voter(1), Voter(2), odd}), {"101"}, false);
    REQUIRE(u.ok());
    CHECK(u->front().member->id == 0x103);
  }
  SUBCASE("upper-case hex is an ID too") {
    auto u = ResolveRemoval(Listing({Voter(10)}), {"10A"}, false);
    REQUIRE(u.ok());
    CHECK(u->front().member->id == 0x10a);
  }
}

TEST_CASE("member remove input that is wrong is InvalidArgument naming the argument") {
  auto listing = Voters(3);
  SUBCASE("no argument") {
    auto r = ResolveRemoval(listing, {}, false);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("at least one MEMBER") != std::string::npos);
  }
  SUBCASE("an unknown name, even after known ones") {
    auto r = ResolveRemoval(listing, {"n1", "n9"}, false);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("'n9'") != std::string::npos);
    CHECK(r.status().message().find("n1, n2, n3") != std::string::npos);
    CHECK(r.status().message().find("--ignore-not-found") != std::string::npos);
  }
  SUBCASE("an unknown ID") {
    CHECK(ResolveRemoval(listing, {"deadbeef"}, false).status().IsInvalidArgument());
  }
  SUBCASE("a name given twice") {
    auto r = ResolveRemoval(listing, {"n2", "n2"}, false);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("given twice") != std::string::npos);
  }
  SUBCASE("one member by name and by ID, with --ignore-not-found too") {
    auto r = ResolveRemoval(listing, {"n2", "102"}, true);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("'n2' and '102'") != std::string::npos);
  }
  SUBCASE("a name two members share") {
    ClusterMember twin = Voter(3);
    twin.name = "n1";
    auto r = ResolveRemoval(Listing({Voter(1), Voter(2), twin}), {"n1"}, false);
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("give the hex ID") != std::string::npos);
  }
  SUBCASE("an empty argument") {
    CHECK(ResolveRemoval(listing, {""}, false).status().IsInvalidArgument());
  }
}

TEST_CASE("a removal keeps quorum exactly when a majority of the remaining voters is healthy") {
  // Every cluster of 1 to 6 voters, every voter as the target, every set of voters down.
  for (int n = 1; n <= 6; ++n) {
    auto listing = Voters(n);
    for (int target = 1; target <= n; ++target) {
      for (int mask = 0; mask < (1 << n); ++mask) {
        std::set<int> down;
        for (int k = 1; k <= n; ++k) {
          if (mask & (1 << (k - 1))) down.insert(k);
        }
        int remaining = n - 1;
        int healthy = remaining - static_cast<int>(down.size()) + (down.count(target) ? 1 : 0);
        bool safe = remaining > 0 && healthy >= remaining / 2 + 1;
        Status s = CheckRemovalKeepsQuorum(listing, 0x100 + target, HealthyBut(listing, down));
        CAPTURE(n);
        CAPTURE(target);
        CAPTURE(mask);
        CHECK(s.ok() == safe);
        if (!safe) CHECK(s.code() == Status::Code::kFailedPrecondition);
      }
    }
  }
}

TEST_CASE("the quorum check explains a refusal and ignores learners") {
  SUBCASE("3 voters, n2 down: removing a running one is refused, naming n2") {
    auto listing = Voters(3);
    Status s = CheckRemovalKeepsQuorum(listing, 0x101, HealthyBut(listing, {2}));
    CHECK(s.message().find("n2 (102): not answering") != std::string::npos);
    CHECK(s.message().find("majority of 2") != std::string::npos);
    CHECK(CheckRemovalKeepsQuorum(listing, 0x102, HealthyBut(listing, {2})).ok());
  }
  SUBCASE("the last voter, even beside a learner") {
    auto listing = Listing({Voter(1), Learner(2)});
    Status s = CheckRemovalKeepsQuorum(listing, 0x101, HealthyBut(listing));
    CHECK(s.code() == Status::Code::kFailedPrecondition);
    CHECK(s.message().find("last voter") != std::string::npos);
  }
  SUBCASE("a learner goes whatever the voters' health") {
    auto listing = Listing({Voter(1), Voter(2), Voter(3), Learner(4)});
    CHECK(CheckRemovalKeepsQuorum(listing, 0x104, HealthyBut(listing, {1, 2, 3})).ok());
  }
  SUBCASE("learners do not count towards the majority") {
    auto listing = Listing({Voter(1), Voter(2), Voter(3), Learner(4), Learner(5)});
    CHECK_FALSE(CheckRemovalKeepsQuorum(listing, 0x101, HealthyBut(listing, {2})).ok());
  }
  SUBCASE("a voter nobody asked does not count, nor does an unstarted one") {
    auto listing = Listing({Voter(1), Voter(2), Voter(3, /*started=*/false)});
    VoterHealth h = HealthyBut(listing);
    h.erase(0x102);
    CHECK_FALSE(CheckRemovalKeepsQuorum(listing, 0x101, h).ok());
  }
  SUBCASE("a member the listing does not hold is nothing to check") {
    CHECK(CheckRemovalKeepsQuorum(Voters(1), 0x999, {}).ok());
  }
}

// A cluster in memory: MemberList answers the current members; MemberRemove removes, or fails with
// the errors queued for it; Maintenance.Status answers for the members not marked down.
class FakeCluster : public EtcdClient {
 public:
  explicit FakeCluster(MemberListing listing) : listing_(std::move(listing)) {}

  Result<MemberListing> MemberList() override { return listing_; }
  Result<MemberListing> MemberListLinearizable() override { return Status::Internal("not expected"); }
  Result<MemberListing> MemberAdd(const std::vector<std::string>&, bool, MemberId*) override {
    return Status::Internal("not expected");
  }
  Status MemberRemove(MemberId id) override {
    removals.push_back(id);
    removal_times.push_back(clock.Now());
    if (!remove_errors.empty()) {
      Status s = remove_errors.front();
      remove_errors.erase(remove_errors.begin());
      if (lose_answer) std::erase_if(listing_.members, [&](const ClusterMember& m) { return m.id == id; });
      return s;
    }
    auto it = std::find_if(listing_.members.begin(), listing_.members.end(),
                           [&](const ClusterMember& m) { return m.id == id; });
    if (it == listing_.members.end()) return Status::NotFound("etcdserver: member not found");
    listing_.members.erase(it);
    return Status::Ok();
  }
  Status MemberPromote(MemberId) override { return Status::Internal("not expected"); }
  Status MemberUpdate(MemberId, const std::vector<std::string>&) override { return Status::Internal("not expected"); }
  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    for (const auto& m : listing_.members) {
      if (m.client_urls.empty() || m.client_urls.front() != endpoint) continue;
      if (down.count(m.id)) break;
      EndpointStatus st;
      st.endpoint = endpoint;
      st.member_id = m.id;
      st.leader = 0x101;
      return st;
    }
    return Status::Unavailable(endpoint + ": connection refused");
  }
  Status Put(const std::string&, const std::string&) override { return Status::Internal("not expected"); }
  Result<std::optional<std::string>> Get(const std::string&) override { return Status::Internal("not expected"); }
  Result<std::vector<KeyValue>> GetPrefix(const std::string&) override { return Status::Internal("not expected"); }
  Result<bool> PutIfAbsent(const std::string&, const std::string&) override { return Status::Internal("not expected"); }
  Result<std::vector<EtcdAlarm>> AlarmList() override { return Status::Internal("not expected"); }
  Status AlarmDisarm(const EtcdAlarm&) override { return Status::Internal("not expected"); }
  Status Compact(int64_t) override { return Status::Internal("not expected"); }
  Status Defragment(const std::string&, std::chrono::milliseconds) override { return Status::Internal("not expected"); }

  std::set<MemberId> down;
  std::vector<Status> remove_errors;  // answered, in turn, before removals start to work
  std::vector<MemberId> removals;     // every MemberRemove call
  std::vector<Clock::TimePoint> removal_times;
  FakeClock clock;
  bool lose_answer = false;           // the removals that fail happen all the same

 private:
  MemberListing listing_;
};

Status Remove(FakeCluster& fake, const std::vector<std::string>& args, std::string* out,
              OutputFormat format = OutputFormat::kSimple, bool ignore_not_found = false) {
  std::ostringstream text;
  RemoveOptions options;
  options.ignore_not_found = ignore_not_found;
  options.retry_for = std::chrono::milliseconds(600);
  RemovalPrinter printer(format, text);
  Status s = RemoveMembers(fake.clock, fake, fake, args, options, printer);
  *out = text.str();
  return s;
}

TEST_CASE("member remove removes in the order given and prints etcdctl's line with the name") {
  FakeCluster fake(Voters(5));
  std::string out;
  REQUIRE(Remove(fake, {"n5", "104"}, &out).ok());
  CHECK(fake.removals == std::vector<MemberId>{0x105, 0x104});
  CHECK(out == "Member 105 (n5) removed from cluster c1\nMember 104 (n4) removed from cluster c1\n");
  CHECK(fake.MemberList()->members.size() == 3);

  SUBCASE("run again, the members are unknown: bad input, or skipped with --ignore-not-found") {
    Status again = Remove(fake, {"n5", "n4"}, &out);
    CHECK(again.IsInvalidArgument());
    CHECK(out.empty());
    REQUIRE(Remove(fake, {"n5", "104"}, &out, OutputFormat::kJson, /*ignore_not_found=*/true).ok());
    CHECK(out ==
          "{\"member\":\"n5\",\"clusterID\":\"c1\",\"result\":\"not a member\"}\n"
          "{\"member\":\"104\",\"clusterID\":\"c1\",\"result\":\"not a member\"}\n");
    CHECK(fake.removals.size() == 2);
  }
}

TEST_CASE("member remove takes its hook (the backup before a change) before each removal; a failure stops there") {
  FakeCluster fake(Voters(5));
  std::ostringstream text;
  RemovalPrinter printer(OutputFormat::kSimple, text);
  RemoveOptions options;
  std::vector<std::string> hooked;
  options.before_remove = [&](const ClusterMember& m) -> Status {
    hooked.push_back(m.name);
    if (m.name == "n4") return Status::Unavailable("the store does not answer");
    return Status::Ok();
  };
  Status s = RemoveMembers(fake.clock, fake, fake, {"n5", "n4", "n3"}, options, printer);
  CHECK(s.IsUnavailable());
  CHECK(hooked == std::vector<std::string>{"n5", "n4"});
  CHECK(fake.removals == std::vector<MemberId>{0x105});
  CHECK(text.str() == "Member 105 (n5) removed from cluster c1\n");
}

TEST_CASE("member remove changes nothing on bad input or when the first removal is unsafe") {
  FakeCluster fake(Voters(3));
  fake.down = {0x102};
  std::string out;
  CHECK(Remove(fake, {"n3", "nope"}, &out).IsInvalidArgument());
  CHECK(Remove(fake, {}, &out).IsInvalidArgument());
  Status s = Remove(fake, {"n3"}, &out);
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK(s.message().find("refusing to remove n3 (103)") != std::string::npos);
  CHECK(fake.removals.empty());
  CHECK(out.empty());
  // The member that is down can go: the two left are both healthy.
  CHECK(Remove(fake, {"n2"}, &out).ok());
}

TEST_CASE("member remove checks each removal against the membership the previous ones left") {
  // 5 voters, n4 and n5 down. n5 then n1: after n5 goes, 3 of the 4 left answer; after n1, 2 of 3.
  FakeCluster fake(Voters(5));
  fake.down = {0x104, 0x105};
  std::string out;
  CHECK(Remove(fake, {"n5", "n1"}, &out).ok());
  // n1 first would leave n2..n5 with 2 of 4 healthy: refused before anything is removed.
  FakeCluster other(Voters(5));
  other.down = {0x104, 0x105};
  CHECK_FALSE(Remove(other, {"n1", "n5"}, &out).ok());
  CHECK(other.removals.empty());
  // n2 after n1: n3 alone would be 1 healthy of 3 left. n1 is removed and printed, then it stops.
  FakeCluster third(Voters(5));
  third.down = {0x104, 0x105};
  Status s = Remove(third, {"n5", "n1", "n2"}, &out);
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK(third.removals == std::vector<MemberId>{0x105, 0x101});
  CHECK(out == "Member 105 (n5) removed from cluster c1\nMember 101 (n1) removed from cluster c1\n");
}

// etcd's answer to MemberRemove 103, classified as the gRPC client classifies it.
Status Refused(grpc::StatusCode code, const std::string& text) {
  return FromGrpc(grpc::Status(code, text), "http://x", "MemberRemove 103");
}

Status Unanswered(const std::string& text) {
  return OutcomeUnknown(grpc::Status(grpc::StatusCode::UNAVAILABLE, text), "http://x", "MemberRemove 103");
}

TEST_CASE("member remove maps etcd's refusals") {
  FakeCluster fake(Voters(3));
  std::string out;
  SUBCASE("too few started members: etcd's strict reconfig check, not retried") {
    fake.remove_errors = {Refused(grpc::StatusCode::FAILED_PRECONDITION,
                                  "etcdserver: re-configuration failed due to not enough started members")};
    Status s = Remove(fake, {"n3"}, &out);
    CHECK(s.code() == Status::Code::kFailedPrecondition);
    CHECK(s.message().find("strict reconfiguration check") != std::string::npos);
    CHECK(s.message().find("etcdserver: re-configuration failed") != std::string::npos);
    CHECK(fake.removals.size() == 1);
  }
  SUBCASE("unhealthy cluster: retried while it clears") {
    fake.remove_errors = {Refused(grpc::StatusCode::UNAVAILABLE, "etcdserver: unhealthy cluster")};
    CHECK(Remove(fake, {"n3"}, &out).ok());
    CHECK(fake.removals.size() == 2);
  }
  SUBCASE("unhealthy cluster for good: a refusal after the retry time, asked at 0, 500 and 600 ms") {
    fake.remove_errors.assign(20, Refused(grpc::StatusCode::UNAVAILABLE, "etcdserver: unhealthy cluster"));
    auto start = fake.clock.Now();
    Status s = Remove(fake, {"n3"}, &out);
    CHECK(s.code() == Status::Code::kFailedPrecondition);
    CHECK(s.message().find("connected to enough voters") != std::string::npos);
    CHECK(fake.MemberList()->members.size() == 3);
    CHECK(fake.removal_times == std::vector<Clock::TimePoint>{start, start + std::chrono::milliseconds(500),
                                                               start + std::chrono::milliseconds(600)});
  }
  SUBCASE("no answer, but the member is gone: it was removed") {
    fake.remove_errors = {Unanswered("etcdserver: server stopped")};
    fake.lose_answer = true;
    CHECK(Remove(fake, {"n3"}, &out).ok());
    CHECK(out == "Member 103 (n3) removed from cluster c1\n");
  }
  SUBCASE("no answer, and the member is still there: the error") {
    fake.remove_errors = {Unanswered("etcdserver: request timed out")};
    Status s = Remove(fake, {"n3"}, &out);
    CHECK(s.IsUnavailable());
    CHECK(s.message().find("may or may not have been done") != std::string::npos);
    CHECK(fake.removals.size() == 1);
  }
  SUBCASE("the reason decides, not the words: other Unavailable errors are not retried") {
    fake.remove_errors = {Status::Unavailable("MemberRemove 103 at http://x: etcdserver: unhealthy cluster")};
    CHECK(Remove(fake, {"n3"}, &out).IsUnavailable());
    CHECK(fake.removals.size() == 1);
  }
  SUBCASE("removed by someone else meanwhile: said so, exit 0") {
    fake.remove_errors = {Status::NotFound("MemberRemove 103 at http://x: etcdserver: member not found")};
    CHECK(Remove(fake, {"n3"}, &out).ok());
    CHECK(out == "Member 103 (n3) was already removed from cluster c1\n");
  }
}

}  // namespace
}  // namespace quorate
