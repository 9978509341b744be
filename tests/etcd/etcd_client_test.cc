// quorate's gRPC etcd client against a real etcd 3.4: membership, status and KV calls, etcd's
// refusals as the client reports them, and what dead, silent and second endpoints cost.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "../support/etcd_node.h"
#include "../support/ports.h"
#include "cli/output.h"
#include "etcd/etcd_client.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// This test's own loopback address (others take 127.0.0.x, 127.0.1.x, 127.0.2.x).
const std::string kIp = "127.0.3.1";

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST_CASE("the etcd client against a real etcd 3.4") {
  const std::string token = "quorate-etcd-client-test";
  const std::string peer_url = "http://" + kIp + ":" + std::to_string(FreePort(kIp));
  const std::string client_url = "http://" + kIp + ":" + std::to_string(FreePort(kIp));
  const std::string dead_url = "http://" + kIp + ":" + std::to_string(FreePort(kIp));
  EtcdNode etcd("n1", peer_url, client_url, "n1=" + peer_url, token);
  const MemberId id = ComputeMemberId({peer_url}, token);

  auto client = MakeEtcdClient({{client_url}, {}, seconds(2)});
  Result<MemberListing> listing = Status::Unavailable("not asked yet");
  for (auto deadline = Clock::now() + seconds(15); Clock::now() < deadline;) {
    REQUIRE_MESSAGE(!etcd.Exited(), ("etcd exited early:\n" + etcd.Log()));
    if ((listing = client->MemberList()).ok()) break;
  }
  REQUIRE_MESSAGE(listing.ok(), (listing.status().message() + "\netcd log:\n" + etcd.Log()));

  {  // membership, status and KV
    REQUIRE(listing->members.size() == 1);
    CHECK(listing->members[0].id == id);
    CHECK(listing->members[0].name == "n1");
    CHECK(listing->members[0].peer_urls == std::vector<std::string>{peer_url});
    CHECK(listing->members[0].client_urls == std::vector<std::string>{client_url});
    CHECK_FALSE(listing->members[0].is_learner);
    CHECK(listing->answered_by == id);
    CHECK(listing->cluster_id == ComputeClusterId({id}));
    auto linearizable = client->MemberListLinearizable();
    REQUIRE_MESSAGE(linearizable.ok(), linearizable.status().message());
    CHECK(linearizable->cluster_id == listing->cluster_id);
    REQUIRE(linearizable->members.size() == 1);
    CHECK(linearizable->members[0].id == id);

    REQUIRE(client->Put("quorate/k", "v1").ok());
    auto got = client->Get("quorate/k");
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    CHECK(*got == std::optional<std::string>("v1"));
    got = client->Get("quorate/missing");
    REQUIRE(got.ok());
    CHECK_FALSE(got->has_value());
    auto first = client->PutIfAbsent("quorate/once", "a");
    auto second = client->PutIfAbsent("quorate/once", "b");
    REQUIRE((first.ok() && second.ok()));
    CHECK(*first);
    CHECK_FALSE(*second);
    auto kvs = client->GetPrefix("quorate/");
    REQUIRE(kvs.ok());
    REQUIRE(kvs->size() == 2);
    CHECK((*kvs)[0].key == "quorate/k");
    CHECK((*kvs)[1].value == "a");

    auto status = client->EndpointStatusOf(client_url);
    REQUIRE_MESSAGE(status.ok(), status.status().message());
    CHECK(status->endpoint == client_url);
    CHECK(status->member_id == id);
    CHECK(status->leader == id);
    CHECK(status->version.rfind("3.4.", 0) == 0);
    CHECK_FALSE(status->is_learner);
    CHECK(status->raft_term >= 2);
    CHECK(status->raft_applied_index >= status->raft_index - 1);
    CHECK(status->db_size > 0);
    CHECK(status->errors.empty());

    const std::string learner_url = "http://127.0.3.2:2380";
    MemberId added = 0;
    auto after_add = client->MemberAdd({learner_url}, /*is_learner=*/true, &added);
    REQUIRE_MESSAGE(after_add.ok(), after_add.status().message());
    CHECK(added != 0);
    REQUIRE(after_add->members.size() == 2);
    auto listed = client->MemberList();
    REQUIRE(listed.ok());
    bool seen = false;
    for (const auto& m : listed->members) {
      if (m.id != added) continue;
      seen = true;
      CHECK(m.is_learner);
      CHECK_FALSE(m.started());
      CHECK(m.peer_urls == std::vector<std::string>{learner_url});
    }
    CHECK(seen);
    CHECK(FormatMemberList(*listed, OutputFormat::kSimple)
              .find(IdToHex(added) + ", unstarted, , " + learner_url + ", , true\n") != std::string::npos);

    // etcd 3.4 derives an added member's ID from its peer URLs and the second it was added, so
    // within the same second it finds the ID first, and the peer URLs after.
    auto again = client->MemberAdd({learner_url}, true, nullptr);
    CHECK(again.status().code() == Status::Code::kFailedPrecondition);
    CHECK_MESSAGE((Has(again.status(), "etcdserver: member ID already exist") ||
                   Has(again.status(), "etcdserver: Peer URLs already exists")),
                  again.status().message());
    auto bad_url = client->MemberAdd({"not a url"}, true, nullptr);
    CHECK_MESSAGE(bad_url.status().IsInvalidArgument(), bad_url.status().message());

    // A learner that never started cannot be in sync: the caller's loop retries, not the client.
    auto start = Clock::now();
    Status promote = client->MemberPromote(added);
    CHECK(Clock::now() - start < seconds(1));
    CHECK(promote.IsUnavailable());
    CHECK_MESSAGE(Has(promote, "MemberPromote " + IdToHex(added) + " at " + client_url +
                                   ": etcdserver: can only promote a learner member which is in sync with leader"),
                  promote.message());
    Status voter = client->MemberPromote(id);
    CHECK(voter.code() == Status::Code::kFailedPrecondition);
    CHECK_MESSAGE(Has(voter, "can only promote a learner member"), voter.message());

    Status removed = client->MemberRemove(added);
    CHECK_MESSAGE(removed.ok(), removed.message());
    listed = client->MemberList();
    REQUIRE(listed.ok());
    CHECK(listed->members.size() == 1);
    Status gone = client->MemberRemove(added);
    CHECK(gone.IsNotFound());
    CHECK_MESSAGE(Has(gone, "etcdserver: member not found"), gone.message());

    Status same = client->MemberUpdate(id, {peer_url});
    CHECK_MESSAGE(same.ok(), same.message());
  }

  {  // a dead endpoint fails within the deadline, naming it
    auto dead = MakeEtcdClient({{dead_url}, {}, milliseconds(800)});
    auto start = Clock::now();
    auto read = dead->MemberList();
    auto took = Clock::now() - start;
    CHECK(took < milliseconds(1200));
    CHECK(read.status().IsUnavailable());
    CHECK_MESSAGE(Has(read.status(), "MemberList: no etcd endpoint answered: " + dead_url), read.status().message());
    // A change is never retried: one refused connection is the answer.
    start = Clock::now();
    Status change = dead->MemberRemove(id);
    CHECK(Clock::now() - start < milliseconds(500));
    CHECK(change.IsUnavailable());
    CHECK_MESSAGE(Has(change, dead_url), change.message());

    SilentListener silent(kIp);
    auto hung = MakeEtcdClient({{silent.url()}, {}, milliseconds(500)});
    start = Clock::now();
    auto status = hung->EndpointStatusOf(silent.url());
    CHECK(Clock::now() - start < milliseconds(900));
    CHECK(status.status().IsUnavailable());
    CHECK_MESSAGE(Has(status.status(), silent.url()), status.status().message());
  }

  {  // the next endpoint answers when the first does not
    auto two = MakeEtcdClient({{dead_url, client_url}, {}, seconds(2)});
    auto read = two->MemberList();
    REQUIRE_MESSAGE(read.ok(), read.status().message());
    CHECK(read->answered_by == id);
    // A change goes on as well: the dead endpoint certainly never received it.
    Status put = two->Put("quorate/two", "x");
    CHECK_MESSAGE(put.ok(), put.message());
    // And etcd's own answer from the second endpoint is what the caller gets.
    Status missing = two->MemberRemove(0x1234);
    CHECK(missing.IsNotFound());
    CHECK_MESSAGE(Has(missing, "MemberRemove 1234 at " + client_url + ": etcdserver: member not found"),
                  missing.message());

    SilentListener silent(kIp);
    auto hung_first = MakeEtcdClient({{silent.url(), client_url}, {}, seconds(1)});
    auto start = Clock::now();
    auto got = hung_first->Get("quorate/two");
    CHECK(Clock::now() - start < milliseconds(1200));
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    CHECK(*got == std::optional<std::string>("x"));
  }
}

}  // namespace
}  // namespace quorate
