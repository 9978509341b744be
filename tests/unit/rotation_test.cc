#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "node/rotation.h"
#include "../support/test_certs.h"
#include "quorate/fs.h"
#include "testing/fake_etcd.h"

namespace quorate {
namespace {

std::string Pem(const std::string& what) {
  return "-----BEGIN CERTIFICATE-----\n" + what + "\n-----END CERTIFICATE-----\n";
}

// A node n1 of three, its peer files in dir/pki (other-ca and its leaf "stranger", for 127.0.0.1: the
// old CA) and in dir/pki/next (ca and its leaf "peer", for 127.0.0.1: the new one), made by openssl; its
// peers on `scheme` (https for a CA rotation, http before the move to TLS).
struct Rig {
  TestCerts certs;
  std::string dir;
  Config config;
  FakeEtcdClient etcd;
  Member self{"n1", {}, {"http://10.0.0.1:2379"}};
  int restarts = 0;

  explicit Rig(const std::string& scheme = "https") {
    self.peer_urls = {scheme + "://127.0.0.1:2380"};
    if (!certs.ok()) return;
    char tmpl[] = "/tmp/quorate-rotation-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    config.name = "n1";
    config.state_dir = dir + "/state";
    config.peer_tls = {dir + "/pki/peer.crt", dir + "/pki/peer.key", dir + "/pki/ca.crt", true};
    Copy("other-ca.crt", "ca.crt");
    Copy("stranger.crt", "peer.crt");
    Copy("stranger.key", "peer.key");
    Copy("ca.crt", "next/ca.crt");
    Copy("peer.crt", "next/peer.crt");
    Copy("peer.key", "next/peer.key");
    for (int i = 1; i <= 3; ++i) {
      std::string n = std::to_string(i);
      etcd.AddStarted(i, "n" + n, {scheme + "://10.0.0." + n + ":2380"}, {"http://10.0.0." + n + ":2379"});
    }
  }
  ~Rig() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  void Copy(const std::string& from, const std::string& to) {
    REQUIRE(WriteFileAtomic(dir + "/pki/" + to, Cert(from)).ok());
  }
  std::string Cert(const std::string& name) { return Read(certs.Path(name)); }
  std::string Read(const std::string& path) {
    auto r = ReadFile(path);
    return r.ok() ? *r : "(missing)";
  }
  std::string Id() {
    auto id = CaFingerprint(dir + "/pki/next/ca.crt");
    REQUIRE(id.ok());
    return *id;
  }
  void Report(const std::string& name, int phase) {
    etcd.keys[kCaRotationMembersPrefix + name] =
        R"({"name":")" + name + R"(","id":")" + Id() + R"(","phase":)" + std::to_string(phase) + "}";
  }
  // A member's record of the move to TLS at port 2381.
  void ReportMove(const std::string& name, int phase) {
    etcd.keys[kPeerHttpsMembersPrefix + name] =
        R"({"name":")" + name + R"(","id":"port 2381","phase":)" + std::to_string(phase) + "}";
  }
  std::vector<std::string> Listed(MemberId id) const {
    for (const auto& m : etcd.Members()) {
      if (m.id == id) return m.peer_urls;
    }
    return {};
  }
};

// R5 for `side`'s new leaf (next/<side>.crt) that its peers or clients would refuse: one issued by another
// CA, then one that does not name `moved`'s host of that side. No restart either way.
void CheckLeafRefused(Rig& rig, CaRotationChange& rotation, const std::string& side, const Member& moved,
                      const std::string& host) {
  rig.Copy("stranger.crt", "next/" + side + ".crt");
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find("next/" + side + ".crt is issued by") != std::string::npos);
  CHECK(rotation.last().reason.find("not by the new " + side + " CA") != std::string::npos);
  rig.Copy("peer.crt", "next/" + side + ".crt");
  rotation.Round(rig.etcd, moved);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find(host) != std::string::npos);
  CHECK(rig.restarts == 0);
}

const std::vector<std::string> kArgv = {"etcd", "--name=n1", "--peer-cert-file=/pki/peer.crt",
                                        "--peer-key-file=/pki/peer.key", "--peer-trusted-ca-file=/pki/ca.crt"};

TEST_CASE("CA rotation: nothing asked, nothing done; etcd keeps the operator's files") {
  Rig rig;
  if (!rig.certs.ok()) return;
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  rotation.Round(rig.etcd, rig.self);
  CHECK(rig.restarts == 0);
  CHECK(rotation.last().rule == "R1");
  CHECK(rotation.EtcdArgv(kArgv) == kArgv);
}

TEST_CASE("CA rotation: the first member restarts onto the bundle, says so once healthy, and the leaves swap live") {
  Rig rig;
  if (!rig.certs.ok()) return;
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
  rotation.Round(rig.etcd, rig.self);
  CHECK(rig.restarts == 1);
  CHECK(rotation.last().action == RollingAction::kRestart);
  // The files etcd is restarted on: old and new CA, the old leaf, the key readable by its owner only.
  const std::string tls = rig.config.state_dir + "/tls/";
  CHECK(rig.Read(tls + "peer-ca.crt") == rig.Cert("other-ca.crt") + rig.Cert("ca.crt"));
  CHECK(rig.Read(tls + "peer.crt") == rig.Cert("stranger.crt"));
  struct stat st{};
  REQUIRE(::stat((tls + "peer.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::vector<std::string> argv = rotation.EtcdArgv(kArgv);
  CHECK(argv[2] == "--peer-cert-file=" + tls + "peer.crt");
  CHECK(argv[3] == "--peer-key-file=" + tls + "peer.key");
  CHECK(argv[4] == "--peer-trusted-ca-file=" + tls + "peer-ca.crt");

  // Back and healthy (the fake's members all answer with a leader): the phase is said, and only
  // public words reach etcd.
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().action == RollingAction::kReport);
  REQUIRE(rig.etcd.keys.count(std::string(kCaRotationMembersPrefix) + "n1") == 1);
  for (const auto& kv : rig.etcd.keys) {
    CHECK(kv.second.find("key") == std::string::npos);
    CHECK(kv.second.find("BEGIN") == std::string::npos);
  }
  auto view = ReadCaRotation(rig.etcd);
  REQUIRE(view.ok());
  CHECK(view->members[0] == std::pair<std::string, int>{"n1", 1});

  // Nothing more while the others are at old.
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R6");
  CHECK(rig.restarts == 1);

  // Every member at bundle: the new leaf goes in place with no restart.
  rig.Report("n2", 1);
  rig.Report("n3", 1);
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().action == RollingAction::kApply);
  CHECK(rig.Read(tls + "peer.crt") == rig.Cert("peer.crt"));
  CHECK(rig.Read(tls + "peer.key") == rig.Cert("peer.key"));
  CHECK(rig.restarts == 1);
}

TEST_CASE("CA rotation: a killed quorate starts etcd on the phase it recorded; done and put in place, the operator's files again") {
  Rig rig;
  if (!rig.certs.ok()) return;
  const std::string tls = rig.config.state_dir + "/tls/";
  {
    CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
    REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
    rig.Report("n2", 2);
    rig.Report("n3", 2);
    rig.Report("n1", 1);
    rotation.Round(rig.etcd, rig.self);  // R3: the record says 1, the node 0: said back down
    CHECK(rotation.last().action == RollingAction::kReport);
    CHECK(rotation.last().phase == 0);
  }
  // A node whose record was lost restarts in order again; a new quorate reads what the last one wrote.
  for (int phase : {1, 2, 3}) {
    CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
    for (int round = 0; round < 3; ++round) rotation.Round(rig.etcd, rig.self);
    CAPTURE(phase);
    rig.Report("n2", phase);
    rig.Report("n3", phase);
  }
  CaRotationChange again(rig.config, [&] { ++rig.restarts; });
  again.Round(rig.etcd, rig.self);
  CHECK(again.last().rule == "R4");
  CHECK(rig.restarts == 2);
  CHECK(rig.Read(tls + "peer-ca.crt") == rig.Cert("ca.crt"));
  CHECK(again.EtcdArgv(kArgv)[4] == "--peer-trusted-ca-file=" + tls + "peer-ca.crt");
  CHECK(ReadCaRotation(rig.etcd)->done());

  // The operator moves next/ over the old files: etcd's next start reads them, and a new rotation may be asked.
  for (const char* f : {"ca.crt", "peer.crt", "peer.key"}) {
    std::filesystem::rename(rig.dir + "/pki/next/" + f, rig.dir + "/pki/" + f);
  }
  CHECK(again.EtcdArgv(kArgv) == kArgv);
  again.Round(rig.etcd, rig.self);
  CHECK(again.last().rule == "R4");
}

TEST_CASE("CA rotation: a next CA that is not the one asked, a next leaf the peers would refuse, or a second rotation under way, is refused") {
  Rig rig;
  if (!rig.certs.ok()) return;
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
  CHECK(AskCaRotation(rig.etcd, rig.Id()).ok());  // asked again: nothing changes
  Status other = AskCaRotation(rig.etcd, std::string(64, 'a'));
  CHECK(other.code() == Status::Code::kFailedPrecondition);
  CHECK(other.message().find("under way") != std::string::npos);

  Member moved = rig.self;
  moved.peer_urls = {"https://10.0.0.9:2380"};
  CheckLeafRefused(rig, rotation, "peer", moved, "10.0.0.9");

  REQUIRE(WriteFileAtomic(rig.dir + "/pki/next/ca.crt", Pem("another ca")).ok());
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find("not the CA the rotation was asked for") != std::string::npos);
  CHECK(rig.restarts == 0);

  std::filesystem::remove(rig.dir + "/pki/next/ca.crt");
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find("next/ca.crt") != std::string::npos);
  CHECK(rig.restarts == 0);
}

// The Rig's node with client TLS too: dir/pki/client-ca.crt (the old CA), client.crt and client.key (its
// leaf "stranger"), and, unless `rotated` is false, next/ beside them (the new CA and its leaf "peer").
void AddClientTls(Rig& rig, bool rotated = true) {
  rig.config.client_tls = {rig.dir + "/pki/client.crt", rig.dir + "/pki/client.key", rig.dir + "/pki/client-ca.crt",
                           true};
  rig.self.client_urls = {"https://127.0.0.1:2379"};
  rig.Copy("other-ca.crt", "client-ca.crt");
  rig.Copy("stranger.crt", "client.crt");
  rig.Copy("stranger.key", "client.key");
  if (!rotated) return;
  rig.Copy("ca.crt", "next/client-ca.crt");
  rig.Copy("peer.crt", "next/client.crt");
  rig.Copy("peer.key", "next/client.key");
}

const std::vector<std::string> kClientArgv = {
    "etcd", "--cert-file=/pki/client.crt", "--key-file", "/pki/client.key", "--trusted-ca-file=/pki/client-ca.crt",
    "--peer-cert-file=/pki/peer.crt"};

TEST_CASE("CA rotation: with next/ beside --trusted-ca-file the client side moves in the same phases, and quorate's own client with it") {
  Rig rig;
  if (!rig.certs.ok()) return;
  AddClientTls(rig);
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  const std::string tls = rig.config.state_dir + "/tls/";
  // Before any phase: etcd and quorate's client on the operator's files.
  CHECK(rotation.EtcdArgv(kClientArgv) == kClientArgv);
  CHECK(rotation.ClientTls(rig.config.client_tls).files.trusted_ca_file == rig.config.client_tls.trusted_ca_file);
  CHECK(rotation.ClientTls(rig.config.client_tls).generation.empty());

  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
  rotation.Round(rig.etcd, rig.self);
  CHECK(rig.restarts == 1);
  // bundle: etcd trusts clients of both CAs and still serves its old client leaf.
  CHECK(rig.Read(tls + "client-ca.crt") == rig.Cert("other-ca.crt") + rig.Cert("ca.crt"));
  CHECK(rig.Read(tls + "client.crt") == rig.Cert("stranger.crt"));
  std::vector<std::string> argv = rotation.EtcdArgv(kClientArgv);
  CHECK(argv[1] == "--cert-file=" + tls + "client.crt");
  CHECK(argv[3] == tls + "client.key");
  CHECK(argv[4] == "--trusted-ca-file=" + tls + "client-ca.crt");
  CHECK(argv[5] == "--peer-cert-file=" + tls + "peer.crt");
  // quorate's own client trusts the bundle and presents the old leaf; given its own --cert, it keeps it.
  OwnClientTls own = rotation.ClientTls(rig.config.client_tls);
  CHECK(own.files.trusted_ca_file == tls + "client-ca.crt");
  CHECK(own.files.cert_file == tls + "client.crt");
  CHECK(own.files.key_file == tls + "client.key");
  const std::string at_bundle = own.generation;
  CHECK_FALSE(at_bundle.empty());
  TlsFiles operators = {"/etc/me.crt", "/etc/me.key", rig.config.client_tls.trusted_ca_file, false};
  CHECK(rotation.ClientTls(operators).files.cert_file == "/etc/me.crt");
  CHECK(rotation.ClientTls(operators).files.trusted_ca_file == tls + "client-ca.crt");

  rotation.Round(rig.etcd, rig.self);  // R3: said
  rig.Report("n2", 1);
  rig.Report("n3", 1);
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().action == RollingAction::kApply);
  // leaves: the new client leaf in place, and a new generation, so upkeep makes its client again.
  CHECK(rig.Read(tls + "client.crt") == rig.Cert("peer.crt"));
  CHECK(rig.Read(tls + "client.key") == rig.Cert("peer.key"));
  CHECK(rotation.ClientTls(rig.config.client_tls).generation != at_bundle);

  rotation.Round(rig.etcd, rig.self);
  rig.Report("n2", 2);
  rig.Report("n3", 2);
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().action == RollingAction::kRestart);
  CHECK(rig.Read(tls + "client-ca.crt") == rig.Cert("ca.crt"));
  CHECK(rotation.EtcdArgv(kClientArgv)[4] == "--trusted-ca-file=" + tls + "client-ca.crt");

  // Done, and the operator moves the client side's next/ in place: etcd and quorate's client on them.
  for (const char* f : {"client-ca.crt", "client.crt", "client.key"}) {
    std::filesystem::rename(rig.dir + "/pki/next/" + f, rig.dir + "/pki/" + f);
  }
  argv = rotation.EtcdArgv(kClientArgv);
  CHECK(argv[1] == "--cert-file=/pki/client.crt");
  CHECK(argv[4] == "--trusted-ca-file=/pki/client-ca.crt");
  CHECK(argv[5] == "--peer-cert-file=" + tls + "peer.crt");  // the peer side's next/ not moved yet
  CHECK(rotation.ClientTls(rig.config.client_tls).generation.empty());
}

TEST_CASE("CA rotation: without next/ beside --trusted-ca-file the client side is left as it is") {
  Rig rig;
  if (!rig.certs.ok()) return;
  AddClientTls(rig, false);
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
  rotation.Round(rig.etcd, rig.self);
  CHECK(rig.restarts == 1);
  std::vector<std::string> argv = rotation.EtcdArgv(kClientArgv);
  CHECK(std::vector(argv.begin(), argv.begin() + 5) == std::vector(kClientArgv.begin(), kClientArgv.begin() + 5));
  CHECK(argv[5] == "--peer-cert-file=" + rig.config.state_dir + "/tls/peer.crt");
  CHECK(rotation.ClientTls(rig.config.client_tls).generation.empty());
}

TEST_CASE("CA rotation: a client side whose next leaf clients would refuse, or that has no leaf, waits (R5) and names it") {
  Rig rig;
  if (!rig.certs.ok()) return;
  AddClientTls(rig);
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());

  Member moved = rig.self;
  moved.client_urls = {"https://10.0.0.7:2379"};
  CheckLeafRefused(rig, rotation, "client", moved, "10.0.0.7");

  std::filesystem::remove(rig.dir + "/pki/next/client.key");
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find("next/client.key") != std::string::npos);
  CHECK(rotation.last().reason.find("new client leaf") != std::string::npos);

  Config leafless = rig.config;
  leafless.client_tls.cert_file.clear();
  CaRotationChange without(leafless, [&] { ++rig.restarts; });
  without.Round(rig.etcd, rig.self);
  CHECK(without.last().rule == "R5");
  CHECK(without.last().reason.find("--cert-file") != std::string::npos);
  CHECK(rig.restarts == 0);
}

TEST_CASE("CA rotation: after one that rotated the client side, the next waits until its client CA is put in place") {
  Rig rig;
  if (!rig.certs.ok()) return;
  AddClientTls(rig);
  // The earlier rotation: done here, the peer's CA put in place, the client's not (its copy holds
  // the CA etcd was left trusting, another than --trusted-ca-file's).
  auto current = CaFingerprint(rig.dir + "/pki/ca.crt");
  REQUIRE(current.ok());
  REQUIRE(MakeDirs(rig.config.state_dir + "/tls").ok());
  REQUIRE(WriteFileAtomic(rig.config.state_dir + "/tls/ca-rotation.json",
                          "{\"id\":\"" + *current + "\",\"phase\":3}").ok());
  REQUIRE(WriteFileAtomic(rig.config.state_dir + "/tls/client-ca.crt", rig.Cert("ca.crt")).ok());
  CaRotationChange rotation(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskCaRotation(rig.etcd, rig.Id()).ok());
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().rule == "R5");
  CHECK(rotation.last().reason.find("not put in place") != std::string::npos);
  CHECK(rotation.last().reason.find("next/client-ca.crt") != std::string::npos);
  // Put in place: the new rotation goes on.
  rig.Copy("ca.crt", "client-ca.crt");
  rotation.Round(rig.etcd, rig.self);
  CHECK(rotation.last().action == RollingAction::kRestart);
}

TEST_CASE("CA rotation: the intent and records are read as etcd holds them, and refused when malformed") {
  auto id = CaRotationIntentId(CaRotationIntentValue(std::string(64, 'b')));
  REQUIRE(id.ok());
  CHECK(*id == std::string(64, 'b'));
  CHECK_FALSE(CaRotationIntentId("{\"id\":\"../x\"}").ok());
  CHECK_FALSE(CaRotationIntentId("not json").ok());
  CHECK_FALSE(ParseRollingReport("{\"name\":\"n1\",\"id\":\"x\",\"phase\":9}", CaRotationSpec().plan).ok());
  CHECK(NextTlsPath("/etc/etcd/pki/ca.crt") == "/etc/etcd/pki/next/ca.crt");
  CHECK(NextTlsPath("ca.crt") == "next/ca.crt");
}

const std::vector<std::string> kHttpArgv = {"etcd", "--name=n1", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                                            "--listen-peer-urls", "http://127.0.0.1:2380"};

TEST_CASE("peer TLS: each member restarts onto both listeners in turn, is listed at https live, then drops http") {
  Rig rig("http");
  if (!rig.certs.ok()) return;
  RollingChanges changes(rig.config, [&] { ++rig.restarts; });
  REQUIRE(AskPeerHttps(rig.etcd, 2381).ok());
  CHECK(AskPeerHttps(rig.etcd, 2381).ok());  // asked again: nothing changes
  Status other = AskPeerHttps(rig.etcd, 2390);
  CHECK(other.code() == Status::Code::kFailedPrecondition);
  // One rolling change at a time: each restarts members on its own count (R8).
  Status ca = AskCaRotation(rig.etcd, std::string(64, 'c'));
  CHECK(ca.code() == Status::Code::kFailedPrecondition);
  CHECK(ca.message().find("peer TLS port 2381 is under way") != std::string::npos);

  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().action == RollingAction::kRestart);
  CHECK(changes.ca().last().rule == "R1");
  CHECK(rig.restarts == 1);
  // Recorded before the restart it asked: etcd starts listening on both.
  CHECK(LoadPeerHttps(rig.config.state_dir).phase == kHttpsPhaseBoth);
  CHECK(LoadPeerHttps(rig.config.state_dir).port == 2381);
  std::vector<std::string> argv = changes.EtcdArgv(kHttpArgv);
  CHECK(argv[2] == "--initial-advertise-peer-urls=http://127.0.0.1:2380");
  CHECK(argv[4] == "http://127.0.0.1:2380,https://127.0.0.1:2381");
  CHECK(changes.AdvertisedPeerUrls(rig.self.peer_urls) == rig.self.peer_urls);

  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().action == RollingAction::kReport);
  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().rule == "R6");

  // Every member on both: n1 lists itself at https, no restart.
  rig.ReportMove("n2", kHttpsPhaseBoth);
  rig.ReportMove("n3", kHttpsPhaseBoth);
  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().action == RollingAction::kApply);
  CHECK(rig.restarts == 1);
  CHECK(rig.Listed(1) == std::vector<std::string>{"https://127.0.0.1:2381"});
  CHECK(changes.AdvertisedPeerUrls(rig.self.peer_urls) == std::vector<std::string>{"https://127.0.0.1:2381"});
  argv = changes.EtcdArgv(kHttpArgv);
  CHECK(argv[2] == "--initial-advertise-peer-urls=https://127.0.0.1:2381");
  CHECK(argv[4] == "https://127.0.0.1:2381,http://127.0.0.1:2380");
  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().action == RollingAction::kReport);

  rig.ReportMove("n2", kHttpsPhaseAdvertised);
  rig.ReportMove("n3", kHttpsPhaseAdvertised);
  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().action == RollingAction::kRestart);
  CHECK(rig.restarts == 2);
  CHECK(changes.EtcdArgv(kHttpArgv)[4] == "https://127.0.0.1:2381");
  changes.Round(rig.etcd, rig.self);
  rig.ReportMove("n2", kHttpsPhaseHttps);
  rig.ReportMove("n3", kHttpsPhaseHttps);
  auto view = ReadRolling(rig.etcd, PeerHttpsSpec());
  REQUIRE(view.ok());
  CHECK(view->done());
  CHECK(FormatRolling(PeerHttpsSpec(), *view).find("peer TLS port 2381: done") == 0);
  changes.Round(rig.etcd, rig.self);
  CHECK(changes.https().last().rule == "R4");
  CHECK(rig.restarts == 2);
}

TEST_CASE("peer TLS: without the peer TLS files, or with a leaf that does not name the host, a node waits and says why") {
  Rig rig("http");
  if (!rig.certs.ok()) return;
  REQUIRE(AskPeerHttps(rig.etcd, 2381).ok());
  {
    Config plain = rig.config;
    plain.peer_tls = {};
    PeerHttpsChange change(plain, [&] { ++rig.restarts; });
    change.Round(rig.etcd, rig.self);
    CHECK(change.last().rule == "R5");
    CHECK(change.last().reason.find("--peer-cert-file") != std::string::npos);
  }
  PeerHttpsChange change(rig.config, [&] { ++rig.restarts; });
  Member moved = rig.self;
  moved.peer_urls = {"http://10.0.0.9:2380"};
  change.Round(rig.etcd, moved);
  CHECK(change.last().rule == "R5");
  CHECK(change.last().reason.find("10.0.0.9") != std::string::npos);
  CHECK(rig.restarts == 0);
  CHECK(LoadPeerHttps(rig.config.state_dir).phase == 0);
}

TEST_CASE("peer TLS: the intent is read as etcd holds it, and refused when malformed") {
  auto id = PeerHttpsIntentId(PeerHttpsIntentValue(2381));
  REQUIRE(id.ok());
  CHECK(*id == "port 2381");
  CHECK_FALSE(PeerHttpsIntentId("{\"port\":70000}").ok());
  CHECK_FALSE(PeerHttpsIntentId("{\"port\":4294969677}").ok());  // 2381 once wrapped into 32 bits
  CHECK_FALSE(PeerHttpsIntentId("{\"port\":18446744073709551615}").ok());
  CHECK_FALSE(PeerHttpsIntentId("{\"port\":\"2381\"}").ok());
  CHECK_FALSE(PeerHttpsIntentId("not json").ok());
  CHECK_FALSE(ParseRollingReport("{\"name\":\"n1\",\"id\":\"port 2381\",\"phase\":4}", PeerHttpsSpec().plan).ok());
}

}  // namespace
}  // namespace quorate
