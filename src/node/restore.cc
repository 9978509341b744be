#include "node/restore.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bucket.h"
#include "core/json.h"
#include "core/planner.h"
#include "discovery/discovery.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_wal.h"
#include "etcd/wal_commit.h"
#include "node/backup_job.h"
#include "node/etcd_env.h"
#include "node/init.h"
#include "node/process.h"
#include "node/stray_etcd.h"
#include "quorate/fs.h"
#include "quorate/json.h"
#include "quorate/log.h"
#include "quorate/text.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMarkerFile = "restore.json";
constexpr auto kProbeTimeout = std::chrono::seconds(2);
constexpr auto kRestoreToolTimeout = std::chrono::minutes(10);
// etcd preallocates its first WAL file at this size (wal.SegmentSizeBytes).
constexpr uint64_t kWalFileBytes = 64ull << 20;

RestoreStepHook& StepHook() {
  static RestoreStepHook hook;
  return hook;
}

void AfterStep(std::string_view step) {
  if (StepHook()) StepHook()(step);
}

// restore.json: the backup and token of this node's restore, written as "restoring" before its
// first step and as "restored" after its last. A marker without a state is one quorate wrote
// before it had the first (finished, then).
struct Marker {
  std::string from;
  std::string token;
  bool finished = false;
};

Marker ReadMarker(const std::string& state_dir) {
  auto text = ReadFile(state_dir + "/" + kMarkerFile, 64 * 1024);
  if (!text.ok()) return {};
  auto doc = ParseForeignJson(*text);
  if (!doc.ok() || !doc->is_object() || !(*doc)["from"].is_string() || !(*doc)["token"].is_string() ||
      !(doc->value("state", "restored") == "restored" || doc->value("state", "") == "restoring")) {
    spdlog::warn("restore marker {}/{} is unreadable; taken as no restore done", state_dir, kMarkerFile);
    return {};
  }
  return {(*doc)["from"].get<std::string>(), (*doc)["token"].get<std::string>(),
          doc->value("state", "restored") == "restored"};
}

const TlsFiles& ClientTls(const Config& c) { return c.etcdctl_tls.enabled() ? c.etcdctl_tls : c.client_tls; }

// The members of any cluster other than `new_cluster` whose etcd reports a leader: the peers'
// GET /members gives each cluster's started members, and their Maintenance.Status the leader.
std::vector<std::string> OldLeaders(const Config& c, Peers& probes, const EtcdClientFactory& etcd_clients,
                                    const std::vector<Member>& peers, ClusterId new_cluster) {
  std::vector<std::string> leaders;
  std::set<std::string> asked;
  for (const Member& peer : peers) {
    for (const std::string& peer_url : peer.peer_urls) {
      auto view = probes.Probe(peer_url, kProbeTimeout);
      if (!view.ok() || view->cluster_id == new_cluster) continue;
      for (const ClusterMember& m : view->members) {
        for (const std::string& endpoint : m.client_urls) {
          if (!asked.insert(endpoint).second) continue;
          auto client = etcd_clients({{endpoint}, ClientTls(c), kProbeTimeout});
          auto status = client->EndpointStatusOf(endpoint);
          if (status.ok() && status->leader != 0) {
            leaders.push_back(fmt::format("{} of cluster {}", m.name.empty() ? endpoint : m.name,
                                          IdToHex(view->cluster_id)));
          }
        }
      }
    }
  }
  return leaders;
}

// A local file written as a Sink: the restore's copy of the snapshot.
class FileSink : public Sink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  ~FileSink() override {
    if (fd_ >= 0) close(fd_);
  }
  Status Write(std::string_view bytes) override {
    if (fd_ < 0) return Status::FromErrno(errno, "create " + path_);
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "write " + path_);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  // No fsync: the copy is read back by etcd's restore tool at once, from the page cache, and never
  // after a crash (a new try makes it again from the backup); what must reach the disk is what the
  // tool writes, and it syncs that itself. Syncing 2x the database here only held a restore up.
  Status Finish() override {
    if (fd_ < 0) return Status::FromErrno(errno, "create " + path_);
    return Status::Ok();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// etcdutl where it exists beside the etcd binary (3.5 and later), else etcdctl (3.4).
Result<std::string> RestoreTool(const Config& c) {
  auto etcd = FindProgram(c.etcd_path);
  if (!etcd.ok()) return Status::InvalidArgument(fmt::format("--etcd: {}", etcd.status().message()));
  const std::string dir = fs::path(*etcd).parent_path().string();
  for (const char* tool : {"etcdutl", "etcdctl"}) {
    const std::string path = dir + "/" + tool;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return Status::FailedPrecondition(
      fmt::format("neither etcdutl nor etcdctl is beside {}: a restore needs etcd's own tool", *etcd));
}

Status RunRestoreTool(const std::string& tool, const std::vector<std::string>& args, const std::string& log_path) {
  LaunchSpec spec;
  spec.argv = {tool};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"ETCDCTL_API", "3"}};
  if (const char* path = getenv("PATH")) spec.env.emplace_back("PATH", path);
  spec.log_path = log_path;
  spdlog::info("restore: {}", fmt::join(spec.argv, " "));
  auto child = RealProcessLauncher().Start(spec);
  if (!child.ok()) return child.status();
  auto exit = (*child)->Wait(kRestoreToolTimeout);
  if (!exit.ok()) return exit.status();
  if (!*exit) return Status::Unavailable(fmt::format("{} did not finish within {} s; see {}", tool,
                                                     std::chrono::duration_cast<std::chrono::seconds>(kRestoreToolTimeout).count(), log_path));
  if (**exit != ExitStatus::Exited(0)) {
    return Status::Internal(fmt::format("{} failed ({}); see {}", tool, (*exit)->ToString(), log_path));
  }
  return Status::Ok();
}


// The bytes free to quorate on the filesystem that holds `path`, or would hold it: the nearest
// directory above it that exists (a lost volume's data dir may not exist yet). Also its device, to
// tell whether two paths share one filesystem.
struct Room {
  uint64_t free_bytes = 0;
  dev_t device = 0;
  std::string at;
};

Result<Room> RoomAt(const std::string& path) {
  fs::path p = fs::absolute(path);
  while (!PathExists(p.string()) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  struct statvfs vfs {};
  struct stat st {};
  if (statvfs(p.c_str(), &vfs) != 0) return Status::FromErrno(errno, "statvfs " + p.string());
  if (stat(p.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + p.string());
  return Room{static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize, st.st_dev, p.string()};
}

// Refused before anything is written when `need` bytes do not fit in `room`.
Status CheckFits(const Room& room, uint64_t need, const std::string& what) {
  if (need <= room.free_bytes) return Status::Ok();
  return Status::FailedPrecondition(fmt::format(
      "{} needs {} bytes on the filesystem of {}, which has {} free: free space there, or give the node a "
      "larger volume",
      what, need, room.at, room.free_bytes));
}

// A restore writes the database twice, the checked copy under the state dir and the member etcd's
// tool restores under the data dir, and etcd's first WAL file beside the latter. The metadata's
// dbBytes says how large the database is; a backup without it (etcd-manager's) is read as it comes,
// and a full disk stops it there.
Status CheckRoomForRestore(const Config& c, const BackupMeta& meta) {
  if (meta.db_bytes == 0) {
    spdlog::info("restore: backup {} declares no database size; the free space is not checked beforehand", meta.url);
    return Status::Ok();
  }
  auto state_room = RoomAt(c.state_dir);
  if (!state_room.ok()) return state_room.status();
  auto data_room = RoomAt(c.data_dir);
  if (!data_room.ok()) return data_room.status();
  const std::string what = fmt::format("restoring backup {} ({} bytes of database, as its metadata declares)",
                                       meta.url, meta.db_bytes);
  if (state_room->device == data_room->device) {
    return CheckFits(*data_room, 2 * meta.db_bytes + kWalFileBytes, what);
  }
  if (Status s = CheckFits(*state_room, meta.db_bytes, what); !s.ok()) return s;
  return CheckFits(*data_room, meta.db_bytes + kWalFileBytes, what);
}

// The local copies a restore makes of the snapshot: the checked copy (and its part while it is
// written) and etcd's scratch output. Removed when a restore ends, well or not, and before a new
// try, so no copy of the keyspace outlives its restore.
struct RestorePaths {
  std::string work;  // <state-dir>/restore: the copy and the tool's log
  std::string db;
  std::string part;
  std::string scratch;  // <data-dir>/restore.tmp
  std::string member;   // <data-dir>/member
};

RestorePaths RestorePathsOf(const Config& c) {
  RestorePaths p;
  p.work = c.state_dir + "/restore";
  p.db = p.work + "/snapshot.db";
  p.part = p.db + ".part";
  p.scratch = c.data_dir + "/restore.tmp";
  p.member = c.data_dir + "/member";
  return p;
}

void RemoveRestoreCopies(const RestorePaths& p) {
  std::error_code ec;
  fs::remove(p.part, ec);
  fs::remove(p.db, ec);
  fs::remove_all(p.scratch, ec);
}

// Removes the restore's copies when it leaves before Keep(): a failure anywhere.
class RestoreCopiesGuard {
 public:
  explicit RestoreCopiesGuard(const RestorePaths& paths) : paths_(paths) {}
  ~RestoreCopiesGuard() {
    if (!kept_) RemoveRestoreCopies(paths_);
  }
  void Keep() { kept_ = true; }

 private:
  const RestorePaths& paths_;
  bool kept_ = false;
};

// Whether member/ is what a restore for `set` wrote for `self`: its WAL names the new member and
// cluster IDs, which hash the new token. Such a member/ comes only from the one rename that puts a
// finished restore in place.
bool HoldsRestoredMember(const Config& c, const MemberSet& set, const Member& self) {
  auto wal = ReadWalIdentity(c.data_dir);
  return wal.ok() && wal->cluster_id == set.cluster_id() && wal->member_id == set.IdOf(self);
}

// Rule 7's steps on disk: the backup into a checked local copy, the old member aside, etcd's
// restore tool into a scratch dir, its member/ into place. The caller removes the copies.
Status RestoreMemberDir(const Config& c, const RestorePaths& p, Vfs& store, const BackupMeta& meta,
                        const std::vector<BackupKey>& keys, const RestoreSeams& seams, const MemberSet& set,
                        const Member& self) {
  if (Status s = MakeDirs(p.work); !s.ok()) return s;
  {
    // Written from either thread of the read back (ReadBackupThrough's handoff), one piece at a
    // time and in order, and finished and closed on this one once the other is done.
    FileSink copy(p.part);
    if (Status s = ReadBackupThrough(store, meta, keys, &copy); !s.ok()) return s;
  }
  AfterStep("snapshot copied");
  if (rename(p.part.c_str(), p.db.c_str()) != 0) return Status::FromErrno(errno, "rename " + p.db);
  AfterStep("snapshot checked");
  spdlog::info("restore: backup {} checked (sha256 {}, revision {}) and copied to {}", meta.url, meta.sha256,
               meta.revision, p.db);

  if (PathExists(p.member)) {
    auto moved = MoveAside(p.member, "before-restore");
    if (!moved.ok()) return moved.status();
    spdlog::info("restore: the old data {} moved aside to {}", p.member, *moved);
    AfterStep("old member aside");
  }

  // What a killed earlier try left in the scratch dir is only its own output, made again here.
  std::error_code ec;
  fs::remove_all(p.scratch, ec);
  AfterStep("scratch cleared");
  if (Status s = seams.restore_tool(
          // The copy's sha256 was checked as it was written: a second pass over the whole
          // database by the tool adds time, not safety.
          {"snapshot", "restore", p.db, "--skip-hash-check", "--name", self.name, "--data-dir", p.scratch,
           "--initial-cluster", set.InitialCluster(), "--initial-cluster-token", set.token(),
           "--initial-advertise-peer-urls", fmt::format("{}", fmt::join(self.peer_urls, ","))},
          p.work + "/restore.log");
      !s.ok()) {
    return s;
  }
  AfterStep("restore tool done");
  if (rename((p.scratch + "/member").c_str(), p.member.c_str()) != 0) {
    return Status::FromErrno(errno, "rename " + p.scratch + "/member to " + p.member);
  }
  if (Status s = SyncDir(c.data_dir); !s.ok()) return s;
  AfterStep("member in place");
  return Status::Ok();
}

// A port on 127.0.0.1 that nothing listens on now, one per call of `count` (etcd takes no port 0).
// Another process may bind one before etcd does; etcd then exits saying so, and is started again.
Result<std::vector<int>> FreeLoopbackPorts(int count) {
  std::vector<int> fds;
  std::vector<int> ports;
  Status status = Status::Ok();
  for (int i = 0; i < count && status.ok(); ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      status = Status::FromErrno(errno, "socket");
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = Status::FromErrno(errno, "a free port on 127.0.0.1");
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  if (!status.ok()) return status;
  return ports;
}

// Rule 8's etcd: the --etcd binary on the private copy of the survivor's member/, alone
// (--force-new-cluster: the other members are gone, and a lone member of several never gets a
// leader, so it would never serve), on loopback ports nobody else uses, with none of the
// operator's ETCD_* variables (one could make it listen elsewhere or join something). Killed when
// it goes.
class EtcdOnCopy : public ReplayedEtcd {
 public:
  static Result<std::unique_ptr<ReplayedEtcd>> Start(const Config& c, const std::string& etcd, const std::string& dir,
                                                      std::chrono::milliseconds timeout);
  Result<SnapshotHeader> Snapshot(const SnapshotSink& sink) override {
    return StreamSnapshot({{client_url_}, TlsFiles{}, timeout_}, client_url_, sink);
  }

 private:
  EtcdOnCopy(std::string dir, std::chrono::milliseconds timeout) : dir_(std::move(dir)), timeout_(timeout) {}
  // Started and serving with a leader (itself); Unavailable with etcd's log when it exits first.
  Status Launch(const Config& c, const std::string& etcd, Clock::TimePoint deadline);

  std::string dir_;
  std::chrono::milliseconds timeout_;
  std::string log_path_;
  std::string client_url_;
  std::unique_ptr<ChildProcess> child_;
};

uint64_t BytesUnder(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// The survivor's member/ copied into <dir>/data (room checked first; what a killed earlier recover
// left there goes first, a copy, never the original), its log committed to its last entry: etcd
// drops what its WAL holds past the last saved commit, and a leader elected from this member would
// commit its whole log (rule 8).
Status PrepareCopy(const Config& c, const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  const std::string member = c.data_dir + "/member";
  auto room = RoomAt(c.state_dir);
  if (!room.ok()) return room.status();
  if (Status s = CheckFits(*room, BytesUnder(member), "a private copy of " + member); !s.ok()) return s;
  if (Status s = MakeDirs(dir + "/data"); !s.ok()) return s;
  fs::copy(member, dir + "/data/member", fs::copy_options::recursive, ec);
  if (ec) return Status::FromErrno(ec.value(), fmt::format("copy {} to {}", member, dir));
  uint64_t committed = 0;
  if (Status s = CommitWalTail(dir + "/data", &committed); !s.ok()) {
    return s.Prefixed(fmt::format("the copy of {}'s WAL", c.name));
  }
  spdlog::info("recover: {} entries of {}'s WAL past its last saved commit are committed in the copy", committed,
               c.name);
  return Status::Ok();
}

Status EtcdOnCopy::Launch(const Config& c, const std::string& etcd, Clock::TimePoint deadline) {
  auto ports = FreeLoopbackPorts(2);
  if (!ports.ok()) return ports.status();
  client_url_ = fmt::format("http://127.0.0.1:{}", (*ports)[0]);
  const std::string peer_url = fmt::format("http://127.0.0.1:{}", (*ports)[1]);
  LaunchSpec spec;
  spec.argv = {etcd, "--name", c.name, "--data-dir", dir_ + "/data", "--force-new-cluster",
               "--listen-client-urls", client_url_, "--advertise-client-urls", client_url_,
               "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
               "--initial-cluster", c.name + "=" + peer_url};
  spec.env = ProcessBasicsEnvironment();
  spec.log_path = log_path_;
  spdlog::info("recover: {}", fmt::join(spec.argv, " "));
  auto child = RealProcessLauncher().Start(spec);
  if (!child.ok()) return child.status();
  child_ = std::move(*child);
  auto client = MakeEtcdClient({{client_url_}, TlsFiles{}, kProbeTimeout});
  Backoff backoff(RealClock(), std::chrono::milliseconds(100), std::chrono::seconds(1), deadline);
  while (true) {
    auto exited = child_->Poll();
    if (!exited.ok()) return exited.status();
    if (*exited) {
      return Status::Unavailable(fmt::format("etcd on the copy of {}'s data exited ({}) before it served; see {}",
                                             c.name, (*exited)->ToString(), log_path_));
    }
    auto status = client->EndpointStatusOf(client_url_);
    if (status.ok() && status->leader != 0) return Status::Ok();
    if (backoff.Wait() != Backoff::kRetry) {
      return Status::Unavailable(fmt::format("etcd on the copy of {}'s data did not serve within --timeout; see {}",
                                             c.name, log_path_));
    }
  }
}

Result<std::unique_ptr<ReplayedEtcd>> EtcdOnCopy::Start(const Config& c, const std::string& etcd,
                                                         const std::string& dir, std::chrono::milliseconds timeout) {
  std::unique_ptr<EtcdOnCopy> copy(new EtcdOnCopy(dir, timeout));
  copy->log_path_ = c.state_dir + "/recover-etcd.log";
  const Clock::TimePoint deadline = RealClock().Now() + c.timeout;
  // A port taken between the look and etcd's bind makes etcd exit at once: twice more on new ports.
  Status launched = Status::Ok();
  for (int attempt = 0; attempt < 3; ++attempt) {
    launched = copy->Launch(c, etcd, deadline);
    if (launched.ok() || copy->child_ == nullptr || !copy->child_->exit_status()) break;
  }
  if (!launched.ok()) return launched;
  return std::unique_ptr<ReplayedEtcd>(std::move(copy));
}

// Removes rule 8's copy when recover ends, whatever happened (after its etcd was killed).
struct CopyRemover {
  std::string dir;
  ~CopyRemover() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

void SetRestoreStepHookForTest(RestoreStepHook hook) { StepHook() = std::move(hook); }

Status RestoreNode(const Config& c, RestoreSeams seams) {
  Clock& clock = seams.clock != nullptr ? *seams.clock : RealClock();
  std::unique_ptr<Peers> own_peers;
  if (seams.peers == nullptr) {
    own_peers = MakePeers(c);
    seams.peers = own_peers.get();
  }
  if (!seams.etcd_clients) seams.etcd_clients = MakeEtcdClient;
  if (!seams.open_store) {
    seams.open_store = [&](const std::string& store_url) { return OpenVfs(store_url, clock.Now() + c.backup_timeout); };
  }
  auto location = ParseBackupUrl(c.restore_from);
  if (!location.ok()) return location.status().Prefixed("--restore-from");
  auto store = seams.open_store(location->store_url);
  if (!store.ok()) return store.status().Prefixed("--restore-from");
  auto keys = LoadBackupKeys(c.backup_key_files);
  if (!keys.ok()) return keys.status();

  // The members to restore for, with the new token: what discovery (or --initial-cluster) says.
  const Clock::TimePoint deadline = clock.Now() + c.timeout;
  auto provider = ProviderFromConfig(c, deadline);
  if (!provider.ok()) return provider.status();
  Backoff discovery_polls(clock, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline);
  auto discovered = DiscoverExpected(**provider, c, discovery_polls);
  if (!discovered.ok()) return discovered.status();
  for (Member& m : *discovered) {
    if (m.name != c.name) continue;
    if (!c.initial_advertise_peer_urls.empty()) m.peer_urls = c.initial_advertise_peer_urls;
    if (!c.advertise_client_urls.empty()) m.client_urls = c.advertise_client_urls;
  }
  auto set = MemberSet::Create(*discovered, c.initial_cluster_token);
  if (!set.ok()) return set.status().Prefixed((*provider)->Describe());
  const Member* self = set->FindByName(c.name);
  if (self == nullptr) {
    return Status::InvalidArgument(fmt::format("--name {} is not one of the members to restore: {}", c.name,
                                               set->InitialCluster()));
  }

  RestoreFacts facts;
  facts.backup_url = c.restore_from;
  facts.new_token = c.initial_cluster_token;
  const Marker marker = ReadMarker(c.state_dir);
  const bool same_restore = marker.from == facts.backup_url && marker.token == facts.new_token;
  if (marker.finished) {
    facts.restored_from = marker.from;
    facts.restored_token = marker.token;
  }
  facts.restoring = same_restore && !marker.finished;
  facts.has_local_data = HasEtcdData(c.data_dir);
  if (auto bucket = LoadBucket(c.state_dir); bucket.ok()) facts.old_token = bucket->members.token();
  facts.force = c.force;
  if (!(same_restore && marker.finished)) {
    std::vector<Member> others;
    for (const Member& m : set->members()) {
      if (m.name != c.name) others.push_back(m);
    }
    facts.old_leaders = OldLeaders(c, *seams.peers, seams.etcd_clients, others, set->cluster_id());
  }
  RestoreDecision decision = PlanRestore(facts);
  spdlog::info("decision: restore: {}", decision.reason);
  switch (decision.action) {
    case RestoreAction::kAlreadyRestored:
      return Status::Ok();
    case RestoreAction::kRefuseInput:
      return Status::InvalidArgument(decision.reason);
    case RestoreAction::kRefuseLive:
      return Status::FailedPrecondition(decision.reason);
    case RestoreAction::kRestore:
      break;
  }

  // 1. What the restore needs, before anything is written: the backup's metadata, the key it was
  //    encrypted with, room for its copies, etcd's restore tool.
  auto meta = ReadBackup(**store, location->store_url, location->folder);
  if (!meta.ok()) return meta.status();
  if (!meta->key_id.empty()) {
    if (auto key = KeyFor(*meta, *keys); !key.ok()) return key.status();
  }
  if (Status s = CheckRoomForRestore(c, *meta); !s.ok()) return s;
  if (!seams.restore_tool) {
    auto tool = RestoreTool(c);
    if (!tool.ok()) return tool.status();
    seams.restore_tool = [tool = *tool](const std::vector<std::string>& args, const std::string& log_path) {
      return RunRestoreTool(tool, args, log_path);
    };
  }

  // 2. The marker, first as "restoring": from here on, the bucket this restore writes (the new
  //    token's) is no old cluster's, and a node killed at any later step and started again with
  //    the same flags takes it up (rule 7).
  const RestorePaths paths = RestorePathsOf(c);
  RestoreCopiesGuard copies(paths);
  const nlohmann::json restoring = {{"from", c.restore_from}, {"token", c.initial_cluster_token},
                                    {"state", "restoring"}, {"startedAt", NowRfc3339()}};
  if (Status s = WriteFileAtomic(c.state_dir + "/" + kMarkerFile, JsonText(restoring, 2) + "\n"); !s.ok()) return s;
  AfterStep("marker restoring");

  // 3. The backup, checked, into member/ (the old one aside) unless an earlier try put it there.
  if (facts.restoring && HoldsRestoredMember(c, *set, *self)) {
    spdlog::info("restore: {} already holds member {} of cluster {}, restored by an earlier try; finishing it",
                 paths.member, IdToHex(set->IdOf(*self)), IdToHex(set->cluster_id()));
  } else if (Status s = RestoreMemberDir(c, paths, **store, *meta, *keys, seams, *set, *self); !s.ok()) {
    return s;
  }
  RemoveRestoreCopies(paths);
  copies.Keep();
  AfterStep("copies removed");

  // 4. The new member bucket, then the marker as "restored": this node is restored.
  if (Status s = SaveBucket(c.state_dir, Bucket{*set, {"new", NowRfc3339()}}); !s.ok()) return s;
  AfterStep("bucket");
  nlohmann::json record = {{"from", c.restore_from}, {"token", c.initial_cluster_token}, {"state", "restored"},
                           {"sha256", meta->sha256}, {"revision", meta->revision}, {"restoredAt", NowRfc3339()}};
  if (Status s = WriteFileAtomic(c.state_dir + "/" + kMarkerFile, JsonText(record, 2) + "\n"); !s.ok()) return s;
  AfterStep("marker restored");
  spdlog::info("restore: {} restored as member {} of new cluster {} (token {}); starting etcd on it", self->name,
               IdToHex(set->IdOf(*self)), IdToHex(set->cluster_id()), set->token());
  return Status::Ok();
}

Result<BackupMeta> RecoverFromMember(const Config& c, RecoverSeams seams) {
  if (c.from_member != c.name) {
    return Status::InvalidArgument(fmt::format(
        "--from-member {} is not this node (--name {}): run recover on {}, whose data seeds the new cluster",
        c.from_member, c.name, c.from_member));
  }
  auto settings = BackupSettingsOf(c);
  if (!settings.ok()) return settings.status();
  if (!HasEtcdData(c.data_dir)) {
    return Status::InvalidArgument(
        fmt::format("--data-dir {}: no WAL in {}/member/wal; recover needs the survivor's data", c.data_dir, c.data_dir));
  }
  if (!seams.replay) {
    auto etcd = FindProgram(c.etcd_path);
    if (!etcd.ok()) return Status::InvalidArgument(fmt::format("--etcd: {}", etcd.status().message()));
    seams.replay = [&c, etcd = *etcd, timeout = settings->timeout](const std::string& dir) {
      return EtcdOnCopy::Start(c, etcd, dir, timeout);
    };
  }
  auto bucket = LoadBucket(c.state_dir);
  if (!bucket.ok()) return bucket.status().Prefixed("the member bucket of the old cluster");
  if (Status s = seams.stop_stray_etcd ? seams.stop_stray_etcd(c.data_dir) : StopStrayEtcd(c.data_dir); !s.ok()) {
    return s;
  }

  std::unique_ptr<Peers> own_peers;
  if (seams.peers == nullptr) {
    own_peers = MakePeers(c);
    seams.peers = own_peers.get();
  }
  if (!seams.etcd_clients) seams.etcd_clients = MakeEtcdClient;
  std::vector<Member> others;
  for (const Member& m : bucket->members.members()) {
    if (m.name != c.name) others.push_back(m);
  }
  std::vector<std::string> leaders = OldLeaders(c, *seams.peers, seams.etcd_clients, others, 0);
  if (!leaders.empty() && !c.force) {
    return Status::FailedPrecondition(fmt::format(
        "the cluster still has a live quorum ({} report a leader): recovering from {} would lose every write "
        "since it fell behind; stop its members first, or give --force",
        fmt::join(leaders, ", "), c.name));
  }

  // member/snap/db lacks what is only in the WAL yet (the last writes before a crash): etcd replays
  // the WAL on a copy, and the backup is that etcd's snapshot, checked and at its revision like any.
  auto store = seams.open_store ? seams.open_store(settings->store_url)
                                : OpenVfs(settings->store_url, RealClock().Now() + settings->timeout);
  if (!store.ok()) return store.status().Prefixed("--backup-to");
  CopyRemover copy{c.state_dir + "/recover"};
  if (Status s = PrepareCopy(c, copy.dir); !s.ok()) return s;
  auto replayed = seams.replay(copy.dir);
  if (!replayed.ok()) return replayed.status();
  SnapshotSource source = [&](const SnapshotSink& sink) -> Result<SnapshotHeader> {
    auto header = (*replayed)->Snapshot(sink);
    if (header.ok()) header->endpoint = fmt::format("the data dir {} of member {}, replayed by etcd", c.data_dir, c.name);
    return header;
  };
  SaveOptions options;
  options.cluster = settings->cluster;
  options.compression = settings->compression;
  if (!settings->keys.empty()) options.key = settings->keys.front();
  options.member_count = static_cast<int>(bucket->members.size());
  options.now = seams.now ? seams.now() : std::chrono::system_clock::now();
  auto meta = SaveBackup(**store, settings->store_url, source, options);
  replayed->reset();
  if (!meta.ok()) return meta.status();
  spdlog::info("recover: the data of {} stored as backup {} at revision {}; the copy etcd replayed it on is removed",
               c.name, meta->url, meta->revision);
  return meta;
}

}  // namespace quorate
