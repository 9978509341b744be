#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "core/bucket.h"
#include "quorate/fs.h"
#include "quorate/provider.h"
#include "quorate/rendezvous.h"
#include "quorate/vfs.h"
#include "testing/forwarding_vfs.h"
#include "testing/mem_vfs.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

// What the tests read back, the oversized records included.
constexpr size_t kWhole = kMaxLocalFileBytes;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-rdv-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

Member Node(int i) {
  return {"n" + std::to_string(i),
          {"http://127.0.0." + std::to_string(i) + ":2380"},
          {"http://127.0.0." + std::to_string(i) + ":2379"}};
}

Rendezvous Make(Vfs& vfs, const std::string& token, size_t size) {
  auto r = Rendezvous::Create(vfs, token, size);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return std::move(*r);
}

std::unique_ptr<Vfs> OpenDir(const std::string& path) {
  auto vfs = OpenVfs(path);
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  return std::move(*vfs);
}

std::vector<std::string> Names(const std::vector<Member>& members) {
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(m.name);
  return names;
}

// Every node of `order` asks once in that order (the first ones see a partial set), then each
// asks again: all must end with the same set, and with the IDs etcd will assign.
void RunInOrder(Vfs& vfs, const std::string& token, const std::vector<int>& order) {
  std::vector<Rendezvous> nodes;
  for (size_t i = 0; i < order.size(); ++i) nodes.push_back(Make(vfs, token, order.size()));
  for (size_t i = 0; i < order.size(); ++i) {
    auto got = nodes[i].Discover(Node(order[i]));
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    CHECK(got->size() == i + 1);  // the progress line: "i+1/N registered"
  }
  std::vector<Member> all;
  for (int i : order) all.push_back(Node(i));
  auto expected = MemberSet::Create(all, token);
  REQUIRE(expected.ok());
  for (size_t i = 0; i < order.size(); ++i) {
    auto got = nodes[i].Discover(Node(order[i]));
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    CHECK(*got == expected->members());
  }
  auto text = vfs.Read(token + "/sealed", kWhole);
  REQUIRE(text.ok());
  auto bucket = DecodeBucket(*text, "sealed");
  REQUIRE(bucket.ok());
  CHECK(bucket->members.cluster_id() == expected->cluster_id());
  CHECK(bucket->members.token() == token);
}

}  // namespace

TEST_CASE("3 and 5 members agree on one set in any start order") {
  for (size_t n : {3, 5}) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 1);
    int permutation = 0;
    do {
      CAPTURE(n);
      CAPTURE(permutation);
      MemVfs exclusive(true);
      RunInOrder(exclusive, "tok", order);
      MemVfs plain(false);
      RunInOrder(plain, "tok", order);
      if (n == 3) {
        TempDir dir;
        RunInOrder(*OpenDir(dir.path), "tok", order);
      }
      ++permutation;
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST_CASE("the seal is a pure function of the registrations") {
  MemVfs a(false), b(false);
  for (MemVfs* vfs : {&a, &b}) {
    for (int i : {3, 1, 2}) REQUIRE(Make(*vfs, "tok", 3).Register(Node(i)).ok());
  }
  // Registrations carry their own time; copy them so both stores hold the same records.
  auto keys = a.List("tok/members");
  REQUIRE(keys.ok());
  for (const auto& key : *keys) REQUIRE(b.Write(key, *a.Read(key, kWhole)).ok());
  REQUIRE(Make(a, "tok", 3).Seal().ok());
  REQUIRE(Make(b, "tok", 3).Seal().ok());
  CHECK(*a.Read("tok/sealed", kWhole) == *b.Read("tok/sealed", kWhole));
  CHECK(a.Read("tok/sealed", kWhole)->find("\"createdAt\": \"\"") == std::string::npos);
}

TEST_CASE("registering again is idempotent; another node with the same name is refused") {
  MemVfs vfs(true);
  Rendezvous r = Make(vfs, "tok", 3);
  REQUIRE(r.Register(Node(1)).ok());
  const std::string record = *vfs.Read("tok/members/n1", kWhole);
  // A restart: same name, same peer URLs, even with other client URLs and another object.
  Member restarted = Node(1);
  restarted.client_urls = {"http://127.0.0.1:12379"};
  CHECK(Make(vfs, "tok", 3).Register(restarted).ok());
  CHECK(r.Register(Node(1)).ok());
  CHECK(*vfs.Read("tok/members/n1", kWhole) == record);

  Member impostor = Node(1);
  impostor.peer_urls = {"http://127.0.0.9:2380"};
  Status s = Make(vfs, "tok", 3).Register(impostor);
  CHECK(s.IsInvalidArgument());
  CHECK(s.message().find("'n1' is already registered") != std::string::npos);
  CHECK(s.message().find("another --name") != std::string::npos);
  CHECK(*vfs.Read("tok/members/n1", kWhole) == record);
  CHECK(vfs.History("tok/members/n1").size() == 1);
}

TEST_CASE("bad input is refused before anything is written") {
  MemVfs vfs(true);
  CHECK(Rendezvous::Create(vfs, "../t", 3).status().IsInvalidArgument());
  CHECK(Rendezvous::Create(vfs, "a/b", 3).status().IsInvalidArgument());
  CHECK(Rendezvous::Create(vfs, "", 3).status().IsInvalidArgument());
  CHECK(Rendezvous::Create(vfs, "tok", 0).status().IsInvalidArgument());
  Rendezvous r = Make(vfs, "tok", 3);
  for (const std::string& name : {std::string("../x"), std::string("a/b"), std::string(""), std::string(".x"),
                                  std::string("n\n1"), std::string(600, 'n')}) {
    CAPTURE(name);
    Member m = Node(1);
    m.name = name;
    CHECK(r.Register(m).IsInvalidArgument());
  }
  Member no_urls = Node(1);
  no_urls.peer_urls.clear();
  CHECK(r.Register(no_urls).IsInvalidArgument());
  Member bad_url = Node(1);
  bad_url.peer_urls = {"127.0.0.1:2380"};
  CHECK(r.Register(bad_url).IsInvalidArgument());
  CHECK(vfs.List("")->empty());
}

TEST_CASE("a node outside a full sealed set is extra; one past a raised size may join") {
  for (bool exclusive : {true, false}) {
    CAPTURE(exclusive);
    MemVfs vfs(exclusive);
    for (int i : {1, 2, 3}) REQUIRE(Make(vfs, "tok", 3).Discover(Node(i)).ok());
    auto extra = Make(vfs, "tok", 3).Discover(Node(4));
    REQUIRE_FALSE(extra.ok());
    CHECK(extra.status().code() == Status::Code::kFailedPrecondition);
    CHECK(extra.status().message() ==
          "extra: the sealed set (n1, n2, n3) in mem:///tok does not include n4; raise --cluster-size or remove a "
          "member");
    // Its registration stays, as any other, but the seal does not move.
    CHECK(vfs.Read("tok/members/n4", kWhole).ok());
    CHECK(vfs.History("tok/sealed").size() == 1);

    auto raised = Make(vfs, "tok", 4).Discover(Node(4));
    REQUIRE(raised.ok());
    CHECK(Names(*raised) == std::vector<std::string>{"n1", "n2", "n3", "n4"});
  }
}

TEST_CASE("with exclusive create, more registrations than seats seal the names that sort first") {
  MemVfs vfs(true);
  for (int i : {5, 2, 4, 1}) REQUIRE(Make(vfs, "tok", 3).Register(Node(i)).ok());
  auto state = Make(vfs, "tok", 3).Seal();
  REQUIRE(state.ok());
  REQUIRE(state->sealed);
  CHECK(Names(state->sealed->members()) == std::vector<std::string>{"n1", "n2", "n4"});
}

TEST_CASE("without exclusive create, more registrations than seats are ambiguous: wait, never guess") {
  MemVfs vfs(false);
  for (int i : {1, 2, 3, 4}) REQUIRE(Make(vfs, "tok", 3).Register(Node(i)).ok());
  auto state = Make(vfs, "tok", 3).Seal();
  REQUIRE(state.ok());
  CHECK_FALSE(state->sealed);
  CHECK(state->ambiguous);
  auto got = Make(vfs, "tok", 3).Discover(Node(1));
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().IsUnavailable());
  CHECK(got.status().message().find("4 registrations (n1, n2, n3, n4) for 3 seats") != std::string::npos);
  CHECK(got.status().message().find("raise --cluster-size to 4") != std::string::npos);
  CHECK(vfs.History("tok/sealed").empty());
  // Raising the size makes it unambiguous.
  auto raised = Make(vfs, "tok", 4).Discover(Node(1));
  REQUIRE(raised.ok());
  CHECK(raised->size() == 4);
}

TEST_CASE("corrupt, truncated and foreign seals are reported and never overwritten") {
  auto other = MemberSet::Create({Node(1), Node(2), Node(3)}, "other");
  REQUIRE(other.ok());
  const std::string foreign = EncodeBucket(Bucket{*other, {"new", ""}});
  auto mine = MemberSet::Create({Node(1), Node(2), Node(3)}, "tok");
  REQUIRE(mine.ok());
  const std::string good = EncodeBucket(Bucket{*mine, {"new", ""}});
  struct Case {
    const char* what;
    std::string content;
    const char* says;
  };
  for (const Case& c : {Case{"truncated", good.substr(0, good.size() / 2), "not valid JSON"},
                        Case{"garbage", "\x01\x02 not a bucket", "not valid JSON"}, Case{"empty", "", "not valid JSON"},
                        Case{"foreign", foreign, "foreign: it was sealed for token 'other'"},
                        Case{"huge", std::string(kMaxRecordBytes + 1, ' '), "quorate accepts there"}}) {
    CAPTURE(c.what);
    TempDir dir;
    auto vfs = OpenDir(dir.path);
    for (int i : {1, 2, 3}) REQUIRE(Make(*vfs, "tok", 3).Register(Node(i)).ok());
    REQUIRE(vfs->Write("tok/sealed", c.content).ok());
    auto got = Make(*vfs, "tok", 3).Discover(Node(1));
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == Status::Code::kDataLoss);
    CHECK(got.status().message().find(dir.path + "/tok/sealed") != std::string::npos);
    CHECK(got.status().message().find(c.says) != std::string::npos);
    CHECK(*vfs->Read("tok/sealed", kWhole) == c.content);
  }
}

TEST_CASE("corrupt registrations are reported by key and never overwritten") {
  const std::string half = R"({"name":"n2","peerURLs":["http://127.0.)";
  struct Case {
    const char* what;
    std::string key;
    std::string content;
    const char* says;
  };
  for (const Case& c : {
           Case{"truncated", "tok/members/n2", half, "not valid JSON"},
           Case{"not an object", "tok/members/n2", "[1,2]", "no name or peerURLs"},
           Case{"renamed", "tok/members/n2", R"({"name":"n3","peerURLs":["http://127.0.0.2:2380"]})",
                "the name inside differs"},
           Case{"bad URL", "tok/members/n2", R"({"name":"n2","peerURLs":["127.0.0.2:2380"]})", "bad URL"},
           Case{"no peer URL", "tok/members/n2", R"({"name":"n2","peerURLs":[]})", "no peer URL"},
           Case{"number URL", "tok/members/n2", R"({"name":"n2","peerURLs":[7]})", "non-string"},
           Case{"huge", "tok/members/n2", std::string(kMaxRecordBytes + 1, 'x'), "quorate accepts there"},
           Case{"nested", "tok/members/n2/x", "{}", "is not a registration"},
       }) {
    CAPTURE(c.what);
    MemVfs vfs(true);
    REQUIRE(vfs.Write(c.key, c.content).ok());
    REQUIRE(Make(vfs, "tok", 2).Register(Node(1)).ok());
    auto got = Make(vfs, "tok", 2).Discover(Node(1));
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == Status::Code::kDataLoss);
    CHECK(got.status().message().find("mem:///" + c.key) != std::string::npos);
    CHECK(got.status().message().find(c.says) != std::string::npos);
    CHECK(*vfs.Read(c.key, kWhole) == c.content);
    CHECK(vfs.History("tok/sealed").empty());
  }
  // The owner of a corrupt registration is told too, and does not replace it.
  MemVfs vfs(true);
  REQUIRE(vfs.Write("tok/members/n2", half).ok());
  Status s = Make(vfs, "tok", 2).Register(Node(2));
  CHECK(s.code() == Status::Code::kDataLoss);
  CHECK(s.message().find("remove it and restart node 'n2'") != std::string::npos);
  CHECK(*vfs.Read("tok/members/n2", kWhole) == half);
}

TEST_CASE("a file in the directory that is no registration is reported") {
  TempDir dir;
  auto vfs = OpenDir(dir.path);
  REQUIRE(Make(*vfs, "tok", 2).Register(Node(1)).ok());
  std::ofstream(dir.path + "/tok/members/bad name") << "{}";
  auto got = Make(*vfs, "tok", 2).Discover(Node(1));
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == Status::Code::kDataLoss);
  CHECK(got.status().message().find("tok/members/bad name is not a registration") != std::string::npos);
}

namespace {

enum class Outcome { kSealed, kExtra, kAmbiguous };

struct RaceResult {
  std::vector<Outcome> outcome;
  std::vector<std::vector<Member>> members;
};

// `nodes` threads start together, each a separate node with its own store handle, and ask until
// they get the full set, are told they are extra, or (without exclusive create) it is ambiguous.
RaceResult Race(const std::function<std::unique_ptr<Vfs>()>& open, const std::string& token, int nodes, size_t size) {
  RaceResult result{std::vector<Outcome>(nodes), std::vector<std::vector<Member>>(nodes)};
  std::latch start(nodes);
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> failures;
  for (int t = 0; t < nodes; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Vfs> vfs = open();
      auto r = Rendezvous::Create(*vfs, token, size);
      start.arrive_and_wait();
      for (int attempt = 0; attempt < 20000; ++attempt) {
        auto got = r->Discover(Node(t + 1));
        if (got.ok() && got->size() == size) {
          result.outcome[t] = Outcome::kSealed;
          result.members[t] = *got;
          return;
        }
        if (got.ok()) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          continue;
        }
        if (got.status().code() == Status::Code::kFailedPrecondition) {
          result.outcome[t] = Outcome::kExtra;
          return;
        }
        if (got.status().IsUnavailable()) {
          result.outcome[t] = Outcome::kAmbiguous;
          return;
        }
        std::lock_guard lock(mu);
        failures.push_back(got.status().message());
        return;
      }
      std::lock_guard lock(mu);
      failures.push_back("node " + std::to_string(t + 1) + " never saw the set complete");
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) FAIL(f);
  return result;
}

}  // namespace

TEST_CASE("6 nodes race for 5 seats in a directory, 20 times: one sealed set, exactly 5 in it, 1 extra") {
  TempDir dir;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    const std::string token = "round-" + std::to_string(round);
    RaceResult r = Race([&] { return OpenDir(dir.path); }, token, 6, 5);
    std::set<std::vector<std::string>> sets;
    int extra = -1;
    for (int t = 0; t < 6; ++t) {
      if (r.outcome[t] == Outcome::kSealed) sets.insert(Names(r.members[t]));
      if (r.outcome[t] == Outcome::kExtra) {
        CHECK(extra == -1);
        extra = t;
      }
      CHECK(r.outcome[t] != Outcome::kAmbiguous);
    }
    REQUIRE(sets.size() == 1);
    REQUIRE(extra != -1);
    const auto& names = *sets.begin();
    CHECK(names.size() == 5);
    CHECK(std::find(names.begin(), names.end(), Node(extra + 1).name) == names.end());
    auto bucket = DecodeBucket(*OpenDir(dir.path)->Read(token + "/sealed", kWhole), "sealed");
    REQUIRE(bucket.ok());
    for (int t = 0; t < 6; ++t) {
      if (t != extra) CHECK(r.members[t] == bucket->members.members());
    }
  }
}

TEST_CASE("6 nodes race for 5 seats on a store without exclusive create, 20 times: never two sealed sets") {
  int sealed_rounds = 0;
  int racing_seals = 0;  // rounds where several writers put the seal, the case the pure encoding is for
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    MemVfs vfs(false);
    // Each node has its own handle on the one store, as on S3.
    RaceResult r = Race([&] { return std::make_unique<ForwardingVfs>(vfs); }, "tok", 6, 5);

    // Every seal ever written, by any racing writer, holds the same set.
    std::set<std::vector<std::string>> written;
    for (const auto& text : vfs.History("tok/sealed")) {
      auto bucket = DecodeBucket(text, "sealed");
      REQUIRE(bucket.ok());
      written.insert(Names(bucket->members.members()));
    }
    CHECK(written.size() <= 1);
    if (vfs.History("tok/sealed").size() > 1) ++racing_seals;
    std::set<std::vector<std::string>> seen;
    for (int t = 0; t < 6; ++t) {
      if (r.outcome[t] == Outcome::kSealed) seen.insert(Names(r.members[t]));
    }
    CHECK(seen.size() <= 1);
    if (!seen.empty()) CHECK(seen == written);

    // Once the writers are done, every node reads one answer: all sealed alike, or all waiting.
    std::set<std::string> answers;
    for (int t = 0; t < 6; ++t) {
      auto got = Make(vfs, "tok", 5).Discover(Node(t + 1));
      if (got.ok()) {
        CHECK(got->size() == 5);
        answers.insert("sealed");
        seen.insert(Names(*got));
      } else {
        answers.insert(got.status().IsUnavailable() ? "ambiguous" : "extra");
      }
    }
    CHECK(seen.size() <= 1);
    if (written.empty()) {
      CHECK(answers == std::set<std::string>{"ambiguous"});
    } else {
      ++sealed_rounds;
      CHECK(answers == std::set<std::string>{"sealed", "extra"});
    }
  }
  MESSAGE(sealed_rounds << "/20 rounds sealed (" << racing_seals
                        << " by racing writers); the others waited on an ambiguous set, as they must");
}

TEST_CASE("the file provider: keys, context, and three nodes agreeing through a directory") {
  TempDir dir;
  auto context_of = [](int i) {
    ProviderContext c;
    c.self = Node(i);
    c.token = "tok";
    c.cluster_size = 3;
    return c;
  };
  auto create = [&](const std::string& text, const ProviderContext& context) {
    auto spec = ParseDiscoverySpec(text);
    REQUIRE(spec.ok());
    return ProviderRegistry::Get().Create(*spec, context);
  };
  const std::string base = "provider=file path=" + dir.path;

  struct Bad {
    std::string spec;
    ProviderContext context;
    const char* says;
  };
  ProviderContext no_name = context_of(1);
  no_name.self = Member{};
  ProviderContext no_size = context_of(1);
  no_size.cluster_size.reset();
  for (const Bad& b :
       {Bad{"provider=file", context_of(1), "needs path="}, Bad{base + "/missing", context_of(1), "not a directory"},
        Bad{"provider=file path=s3://b/p", context_of(1), "use provider=s3"},
        Bad{base + " colour=blue", context_of(1), "no key 'colour'"}, Bad{base, no_name, "set --name"},
        Bad{base, no_size, "set --cluster-size"},
        Bad{base + " size=4", context_of(1), "size=4 but --cluster-size is 3"},
        Bad{base + " size=zero", no_size, "a whole number from 1 to 99"},
        Bad{base + " size=100", no_size, "size=100: want the member count, a whole number from 1 to 99"},
        Bad{base + " token=other", context_of(1), "token=other but --initial-cluster-token"}}) {
    CAPTURE(b.spec);
    auto p = create(b.spec, b.context);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().IsInvalidArgument());
    CHECK(p.status().message().find(b.says) != std::string::npos);
  }
  ProviderContext bad_token = context_of(1);
  bad_token.token = "../x";
  CHECK(create(base, bad_token).status().message().find("cluster token '../x'") != std::string::npos);
  CHECK(fs::is_empty(dir.path));
  // The registry's old entry point has no context: a rendezvous provider says what it lacks.
  auto spec = ParseDiscoverySpec(base + " size=3");
  REQUIRE(spec.ok());
  CHECK(ProviderRegistry::Get().Create(*spec).status().message().find("set --name") != std::string::npos);

  std::vector<std::unique_ptr<DiscoveryProvider>> providers;
  for (int i : {2, 3, 1}) {
    auto p = create(base, context_of(i));
    REQUIRE_MESSAGE(p.ok(), p.status().message());
    CHECK((*p)->ImpliedSize() == std::optional<size_t>(3));
    CHECK((*p)->Describe() == "file file://" + dir.path + "/tok (3 members)");
    providers.push_back(std::move(*p));
  }
  // With size= and token= instead of the context, the same rendezvous.
  ProviderContext bare;
  bare.self = Node(1);
  auto keyed = create(base + " size=3 token=tok", bare);
  REQUIRE(keyed.ok());

  CHECK(providers[0]->Discover()->size() == 1);
  CHECK(providers[1]->Discover()->size() == 2);
  auto expected = MemberSet::Create({Node(1), Node(2), Node(3)}, "tok");
  REQUIRE(expected.ok());
  for (auto* p : {providers[2].get(), providers[0].get(), providers[1].get(), keyed->get()}) {
    auto got = p->Discover();
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    CHECK(*got == expected->members());
  }
}

}  // namespace quorate
