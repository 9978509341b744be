#include "cli/cli.h"

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/options.h"
#include "cli/output.h"
#include "core/bucket.h"
#include "etcd/etcd_client.h"
#include "etcd/peer_probe.h"
#include "node/backup_job.h"
#include "node/etcd_binary.h"
#include "node/init.h"
#include "node/member_remove.h"
#include "node/process.h"
#include "node/restore.h"
#include "node/rotation.h"
#include "node/run.h"
#include "node/tls_renew.h"
#include "quorate/log.h"
#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/text.h"
#include "store/sealed_bucket.h"

namespace quorate {
namespace {

// Options every command takes, then each command's own.
const std::vector<std::string> kCommon = {"config", "log-format", "log-level"};
const std::vector<std::string> kDiscovery = {"name", "initial-cluster", "initial-cluster-token", "discovery-srv",
                                             "discovery-srv-name", "discovery", "cluster-size", "timeout"};
const std::vector<std::string> kNode = {"data-dir", "initial-advertise-peer-urls", "advertise-client-urls",
                                        "listen-peer-urls", "listen-client-urls", "cert-file", "key-file",
                                        "trusted-ca-file", "client-cert-auth", "peer-cert-file", "peer-key-file",
                                        "peer-trusted-ca-file", "peer-client-cert-auth", "state-dir",
                                        "agent-listen", "agent-port", "cacert", "cert", "key", "bucket"};

std::vector<std::string> Concat(std::initializer_list<std::vector<std::string>> lists) {
  std::vector<std::string> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

constexpr size_t kMaxErrorBytes = 4096;

int Fail(const Status& status) {
  // Messages quote what the operator or a peer sent: one line, escaped and cut, whatever that was.
  std::cerr << "quorate: error: " << Printable(status.message(), kMaxErrorBytes) << "\n";
  return static_cast<int>(status.exit_code());
}

// What a command is given besides its options.
struct Words {
  std::vector<std::string> args;   // positional, for a command with `positional`
  std::vector<std::string> extra;  // the words after `--`, for etcd
  std::string_view build_commit;   // the commit this binary was built from, for `version`
};

struct Command {
  const char* group;  // "member" for `quorate member list`; nullptr for a top-level command
  const char* name;
  const char* help;
  std::vector<std::string> keys;
  int (*run)(const Config& config, const Words& words);
  bool takes_extra = false;
  // The positional arguments' name and help ("MEMBER", "..."); nullptr for a command without any.
  const char* positional = nullptr;
  const char* positional_help = nullptr;
};

int Discover(const Config& config, const Words&) {
  const Clock::TimePoint deadline = std::chrono::steady_clock::now() + config.timeout;
  auto provider = ProviderFromConfig(config, deadline);
  if (!provider.ok()) return Fail(provider.status());
  Result<std::vector<Member>> members = Status::Internal("unset");
  if (config.cluster_size) {
    members = DiscoverExpected(**provider, config, deadline);
  } else {
    // One look, unlike init: what it finds missing (no records yet) is a runtime failure, exit 1.
    members = (*provider)->Discover();
  }
  if (!members.ok()) return Fail(members.status());
  // Nothing found is what was fetched, not what the operator typed: exit 1, as any other answer.
  if (members->empty()) return Fail(Status::Unavailable(fmt::format("{} found no member", (*provider)->Describe())));
  auto set = MemberSet::Create(*members, config.initial_cluster_token);
  if (!set.ok()) return Fail(set.status().Prefixed((*provider)->Describe()));
  // Where the size init would wait for comes from, as DiscoverExpected takes it.
  SizeSource size{members->size(), "the members found"};
  if (config.cluster_size) {
    size = {*config.cluster_size, "--cluster-size"};
  } else if (auto implied = (*provider)->ImpliedSize()) {
    size = {*implied, (*provider)->Describe()};
  }
  if (config.output != OutputFormat::kJson) {
    std::cout << FormatDiscovered(*set, config.output, &size);
    return 0;
  }
  // What each member runs, for the upgrade rules (docs/DESIGN.md §4 rule 6); silent members are null.
  auto versions = AskVersions(set->members(), config.peer_tls, std::chrono::seconds(1));
  std::cout << FormatDiscovered(*set, config.output, &size, &versions);
  return 0;
}

int ClusterInit(const Config& config, const Words&) {
  if (config.bucket.empty()) {
    return Fail(Status::InvalidArgument(std::string("--bucket is required: where to write the member bucket, ") + kStoreForms));
  }
  const Clock::TimePoint deadline = std::chrono::steady_clock::now() + config.timeout;
  auto provider = ProviderFromConfig(config, deadline);
  if (!provider.ok()) return Fail(provider.status());
  auto members = DiscoverExpected(**provider, config, deadline);
  if (!members.ok()) {
    return Fail(members.status());
  }
  auto set = MemberSet::Create(*members, config.initial_cluster_token);
  if (!set.ok()) return Fail(set.status().Prefixed((*provider)->Describe()));
  auto written = WriteSealedBucket(config.bucket, Bucket{*set, {"new", NowRfc3339()}});
  if (!written.ok()) return Fail(written.status());
  spdlog::info("{} the member set of cluster {} in {}", *written ? "sealed" : "found already sealed", IdToHex(set->cluster_id()),
               config.bucket);
  std::cout << FormatDiscovered(*set, config.output);
  if (config.output != OutputFormat::kJson) {
    std::cout << fmt::format("initial cluster: {}\nnodes started with --bucket {} --initial-cluster-token {} read it\n",
                             set->InitialCluster(), config.bucket, set->token());
  }
  return 0;
}

int Init(const Config& config, const Words&) {
  // As `quorate run` does, before the job's peer probes (which present the peer leaf) and before the
  // etcd container starts on the files init names: a leaf missing or expired, a pod off past its
  // leaf's life, is issued again (rule T2). From then on `quorate upkeep` renews.
  auto tls = TlsRenewer::Create(config, RealClock());
  if (!tls.ok()) return Fail(tls.status());
  if (*tls) {
    if (Status s = (*tls)->BeforeStart(); !s.ok()) return Fail(s);
  }
  InitJob job(config);
  auto outcome = job.Run();
  if (!outcome.ok()) return Fail(outcome.status());
  std::cout << FormatInitOutcome(*outcome, config.output);
  return 0;
}

// The version etcd --version states, or "not found".
std::string EtcdVersion(const std::string& etcd_path) {
  auto version = EtcdBinaryVersion(etcd_path);
  return version.ok() ? version->ToString() : "not found";
}

int Version(const Config& config, const Words& words) {
  ClusterVersionSeen cluster = SeeClusterVersion(config);
  std::cout << FormatVersions(words.build_commit, EtcdVersion(config.etcd_path), config.etcd_path,
                              cluster.version ? cluster.version->ToString() : "", Printable(cluster.source),
                              config.output);
  return 0;
}

// etcd's --quota-backend-bytes, given to quorate or after `--`: etcd gets it, and so does the leader's
// maintenance (DESIGN §12), which must know where etcd raises NOSPACE. After `--` it stays as given.
Result<std::pair<Config, std::vector<std::string>>> WithQuota(const Config& config, std::vector<std::string> extra) {
  Config c = config;
  for (size_t i = 0; i < extra.size(); ++i) {
    std::string value;
    if (extra[i].starts_with("--quota-backend-bytes=")) {
      value = extra[i].substr(extra[i].find('=') + 1);
    } else if (extra[i] == "--quota-backend-bytes" && i + 1 < extra.size()) {
      value = extra[i + 1];
    } else {
      continue;
    }
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < 0) {
      return Status::InvalidArgument(
          fmt::format("etcd flag --quota-backend-bytes: '{}' is not a number of bytes", Printable(value, 64)));
    }
    c.quota_backend_bytes = n;
    return std::pair{c, extra};
  }
  if (c.quota_backend_bytes > 0) extra.push_back(fmt::format("--quota-backend-bytes={}", c.quota_backend_bytes));
  return std::pair{c, extra};
}

int Run(const Config& config, const Words& words) {
  auto with_quota = WithQuota(config, words.extra);
  if (!with_quota.ok()) return Fail(with_quota.status());
  Status s = RunNode(with_quota->first, with_quota->second);
  return s.ok() ? 0 : Fail(s);
}

int Upkeep(const Config& config, const Words&) {
  Status s = UpkeepNode(config);
  return s.ok() ? 0 : Fail(s);
}

int MemberList(const Config& config, const Words&) {
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  auto listing = client->MemberList();
  if (!listing.ok()) return Fail(listing.status());
  // Members on https peer URLs: when each one's peer certificate expires, from its handshake (§13).
  std::vector<std::optional<WallTime>> expiry;
  bool tls = false;
  for (const auto& m : listing->members) {
    expiry.emplace_back();
    for (const auto& url : m.peer_urls) {
      if (url.rfind("https://", 0) != 0) continue;
      tls = true;
      auto t = ProbePeerCertNotAfter(url, config.peer_tls, std::chrono::seconds(2));
      if (t.ok()) {
        expiry.back() = *t;
        break;
      }
      spdlog::debug("member {}: no peer certificate read: {}", m.name, t.status().message());
    }
  }
  std::cout << FormatMemberList(*listing, config.output, tls ? &expiry : nullptr);
  return 0;
}

int MemberRemove(const Config& config, const Words& words) {
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  // A voter that is down must not cost the whole call timeout of every check.
  auto probe = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(2)});
  RemoveOptions options;
  options.ignore_not_found = config.ignore_not_found;
  if (!config.backup_to.empty()) {
    options.before_remove = [&](const ClusterMember& m) -> Status {
      auto backup = BackupBeforeChange(config, *client, config.endpoints,
                                       RealSnapshotSources(config.etcdctl_tls, config.backup_timeout));
      if (!backup.ok()) {
        return backup.status().Prefixed(fmt::format(
            "no backup before removing {} ({}), so it was not removed (without --backup-to it is removed without "
            "one)",
            m.name.empty() ? IdToHex(m.id) : m.name, IdToHex(m.id)));
      }
      spdlog::info("backup {} taken before removing member {}", (*backup)->url, IdToHex(m.id));
      return Status::Ok();
    };
  }
  RemovalPrinter printer(config.output, std::cout);
  Status s = RemoveMembers(RealClock(), *client, *probe, words.args, options, printer);
  return s.ok() ? 0 : Fail(s);
}

// What the leader's maintenance (DESIGN §12) would do now, asked as the leader's quorate asks.
int MaintenanceStatus(const Config& config, const Words&) {
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  Result<EndpointStatus> status = Status::Unavailable("no endpoint");
  for (const std::string& endpoint : config.endpoints) {
    status = client->EndpointStatusOf(endpoint);
    if (status.ok() && status->leader != 0) break;
  }
  if (!status.ok()) return Fail(status.status());
  if (status->leader == 0) return Fail(Status::Unavailable("no member at --endpoints knows a leader"));
  Maintainer maintainer(MaintenanceSettingsOf(config), RealClock());
  auto look = maintainer.Look(*client, status->leader);
  if (!look.ok()) return Fail(look.status());
  std::cout << FormatMaintenance(*look, config.output);
  return 0;
}

// DESIGN §14: asks every node's quorate to rotate the peer CA to the one in next/ beside
// --peer-trusted-ca-file (and its client CA where next/ is beside --trusted-ca-file); prints where each
// member is.
int TlsRotateCa(const Config& config, const Words&) {
  if (config.peer_tls.trusted_ca_file.empty()) {
    return Fail(Status::InvalidArgument("--peer-trusted-ca-file: give the peer CA the cluster trusts now; the new "
                                        "one is read from next/ beside it"));
  }
  const std::string next = NextTlsPath(config.peer_tls.trusted_ca_file);
  auto id = CaFingerprint(next);
  if (!id.ok()) {
    return Fail(Status::InvalidArgument(
        fmt::format("--peer-trusted-ca-file: {}; put the new CA's certificate at {}", id.status().message(), next)));
  }
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  if (Status s = AskCaRotation(*client, *id); !s.ok()) return Fail(s);
  spdlog::info("CA rotation to {} (sha256 {}) asked: every node's quorate carries it out", next, id->substr(0, 12));
  auto view = ReadCaRotation(*client);
  if (!view.ok()) return Fail(view.status());
  std::cout << FormatCaRotation(*view);
  return 0;
}

// DESIGN §14: asks every node's quorate to move its member's peers from http to https at
// --peer-https-port, on the peer TLS files each quorate is given; prints where each member is.
int TlsToHttps(const Config& config, const Words&) {
  if (config.peer_https_port == 0) {
    return Fail(Status::InvalidArgument(
        "--peer-https-port: give the port each member's https peer URL is to have (not its http one)"));
  }
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  auto listing = client->MemberList();
  if (!listing.ok()) return Fail(listing.status());
  auto asked = ReadRolling(*client, PeerHttpsSpec());
  if (!asked.ok()) return Fail(asked.status());
  bool any_http = false;
  for (const ClusterMember& m : listing->members) {
    for (const std::string& u : m.peer_urls) {
      auto url = ParseUrl(u);
      if (!url.ok() || url->scheme != "http") continue;
      any_http = true;
      // On a port one of them already listens on for peers, the https listener would not bind.
      if (url->port == config.peer_https_port) {
        return Fail(Status::InvalidArgument(fmt::format(
            "--peer-https-port {}: member {} listens for peers there over http ({}); give another port",
            config.peer_https_port, m.name.empty() ? IdToHex(m.id) : m.name, u)));
      }
    }
  }
  // Asked again once done, the answer is the same; a new move of a cluster on https would only
  // restart every member twice.
  if (!any_http && asked->id != PeerHttpsId(config.peer_https_port)) {
    return Fail(Status::InvalidArgument(fmt::format(
        "--endpoints: every member of cluster {} is listed at https peer URLs already; nothing to move",
        IdToHex(listing->cluster_id))));
  }
  if (Status s = AskPeerHttps(*client, config.peer_https_port); !s.ok()) return Fail(s);
  spdlog::info("move of the peers to https on port {} asked: every node's quorate carries it out",
               config.peer_https_port);
  auto view = ReadRolling(*client, PeerHttpsSpec());
  if (!view.ok()) return Fail(view.status());
  std::cout << FormatRolling(PeerHttpsSpec(), *view);
  return 0;
}

int TlsStatus(const Config& config, const Words&) {
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  for (const RollingSpec& spec : {CaRotationSpec(), PeerHttpsSpec()}) {
    auto view = ReadRolling(*client, spec);
    if (!view.ok()) return Fail(view.status());
    std::cout << FormatRolling(spec, *view);
  }
  return 0;
}

// The backup commands' options.
// The certificates quorate issues or watches (docs/DESIGN.md §13).
const std::vector<std::string> kTls = {"tls-ca-cert-file", "tls-ca-key-file",   "tls-leaves",
                                       "tls-extra-names",  "tls-leaf-lifetime", "tls-expiry-warning"};
const std::vector<std::string> kBackupStore = {"backup-to", "backup-key-file", "backup-cluster", "backup-timeout"};
const std::vector<std::string> kMaintenance = {"maintenance",       "defrag-min-bytes",    "defrag-min-percent",
                                               "maintenance-pause", "quota-backend-bytes", "compaction-keep-revisions",
                                               "learner-deadline",  "scale-in"};
const std::vector<std::string> kRunBackups = {"backup-compression", "backup-schedule", "backup-keep-hourly-days",
                                              "backup-keep-daily-days", "restore-from", "force"};

Result<std::unique_ptr<Vfs>> OpenBackupStore(const BackupSettings& settings) {
  auto store = OpenVfs(settings.store_url, RealClock().Now() + settings.timeout);
  if (!store.ok()) return store.status().Prefixed("--backup-to");
  return store;
}

int BackupSave(const Config& config, const Words&) {
  auto settings = BackupSettingsOf(config);
  if (!settings.ok()) return Fail(settings.status());
  auto store = OpenBackupStore(*settings);
  if (!store.ok()) return Fail(store.status());
  auto client = MakeEtcdClient({config.endpoints, config.etcdctl_tls, std::chrono::seconds(5)});
  auto meta = TakeBackup(*settings, **store, *client, config.endpoints,
                         RealSnapshotSources(config.etcdctl_tls, settings->timeout), std::chrono::system_clock::now());
  if (!meta.ok()) return Fail(meta.status());
  spdlog::info("backup {} saved from {}", meta->url, meta->source);
  std::cout << FormatBackup(*meta, config.output);
  return 0;
}

int Recover(const Config& config, const Words&) {
  auto meta = RecoverFromMember(config);
  if (!meta.ok()) return Fail(meta.status());
  if (config.output == OutputFormat::kSimple) {
    std::cout << fmt::format(
        "the data of {} is backup {}\nnext, on every node (this one too): quorate run --restore-from {} "
        "--initial-cluster-token <a new token> ...\n",
        config.name, meta->url, meta->url);
  }
  std::cout << FormatBackup(*meta, config.output);
  return 0;
}

int BackupList(const Config& config, const Words&) {
  auto settings = BackupSettingsOf(config);
  if (!settings.ok()) return Fail(settings.status());
  auto store = OpenBackupStore(*settings);
  if (!store.ok()) return Fail(store.status());
  auto backups = ListBackups(**store, settings->store_url, settings->cluster);
  if (!backups.ok()) return Fail(backups.status());
  std::cout << FormatBackupList(*backups, config.output);
  return 0;
}

// Each BACKUP read whole through its checks; with none, the latest in --backup-to.
int BackupVerify(const Config& config, const Words& words) {
  auto keys = LoadBackupKeys(config.backup_key_files);
  if (!keys.ok()) return Fail(keys.status());
  std::vector<std::string> urls = words.args;
  if (urls.empty()) {
    auto settings = BackupSettingsOf(config);
    if (!settings.ok()) return Fail(settings.status().Prefixed("no BACKUP given"));
    auto store = OpenBackupStore(*settings);
    if (!store.ok()) return Fail(store.status());
    auto backups = ListBackups(**store, settings->store_url, settings->cluster);
    if (!backups.ok()) return Fail(backups.status());
    if (backups->empty()) {
      return Fail(Status::NotFound(fmt::format("no backups of cluster {} in {}", settings->cluster, settings->store_url)));
    }
    urls.push_back(backups->back().url);
  }
  for (const std::string& url : urls) {
    auto location = ParseBackupUrl(url);
    if (!location.ok()) return Fail(location.status());
    auto store = OpenVfs(location->store_url, RealClock().Now() + config.backup_timeout);
    if (!store.ok()) return Fail(store.status());
    auto meta = ReadBackup(**store, location->store_url, location->folder);
    if (!meta.ok()) return Fail(meta.status());
    BackupRead read;
    if (Status s = ReadBackupThrough(**store, *meta, *keys, nullptr, &read); !s.ok()) return Fail(s);
    if (meta->quorate) {
      spdlog::info("backup {} verified: sha256 {} matches etcd's and the metadata's", meta->url, meta->sha256);
    } else {
      spdlog::info("backup {} verified as far as it can be: etcd's own hash holds (sha256 {}); it has no quorate "
                   "metadata to check it against",
                   meta->url, read.sha256);
    }
    std::cout << FormatVerifiedBackup(*meta, read, config.output);
  }
  return 0;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {nullptr, "discover", "resolve the peers and print them with the IDs etcd will assign",
       Concat({kCommon,
               kDiscovery,
               {"write-out", "initial-advertise-peer-urls", "advertise-client-urls", "peer-cert-file", "peer-key-file",
                "peer-trusted-ca-file"}}),
       Discover},
      {nullptr, "cluster-init", "resolve the members once and seal them as a member bucket in --bucket",
       Concat({kCommon, kDiscovery, {"bucket", "write-out", "initial-advertise-peer-urls"}}), ClusterInit},
      {nullptr, "init", "discover, decide how to start, write the member bucket and etcd's config; idempotent",
       Concat({kCommon, kDiscovery, kNode, {"write-out", "etcd"}, kTls}), Init},
      {nullptr, "run", "init, then run etcd and keep it whole: restarts, learner promotion, /healthz /readyz /metrics",
       Concat({kCommon, kDiscovery, kNode, {"etcd", "status-listen"}, kBackupStore, kRunBackups, kMaintenance, kTls}),
       Run,
       /*takes_extra=*/true},
      {nullptr, "upkeep",
       "beside an etcd started on init's config: promote this member once a caught-up learner, keep its peer URLs, "
       "serve /healthz /readyz /metrics",
       Concat({kCommon,
               kMaintenance,
               kTls,
               {"name", "data-dir", "state-dir", "status-listen", "cert-file", "key-file", "trusted-ca-file", "cacert",
                "cert", "key", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "initial-advertise-peer-urls",
                "advertise-client-urls", "listen-peer-urls", "listen-client-urls"}}),
       Upkeep},
      {"member", "list", "the live membership, over etcd's API",
       Concat({kCommon,
               {"endpoints", "cacert", "cert", "key", "write-out", "peer-cert-file", "peer-key-file",
                "peer-trusted-ca-file"}}),
       MemberList},
      {"member", "remove",
       "remove members, one at a time, each only if the voters left keep a healthy majority; "
       "prints \"Member <id> (<name>) removed from cluster <id>\" per member",
       Concat({kCommon,
               kBackupStore,
               {"endpoints", "cacert", "cert", "key", "write-out", "ignore-not-found", "backup-compression"}}),
       MemberRemove,
       /*takes_extra=*/false, "MEMBER",
       "member names as etcd lists them, or hex member IDs; all are resolved against one member list before "
       "any is removed, and removed in the order given. Unknown, repeated or none: exit 2, nothing removed. "
       "Unsafe (the remaining started, healthy voters would not be a majority, or the last voter): exit 1"},
      {"maintenance", "status",
       "what the leader's quorate would do now to keep etcd's database in shape (compaction, defragmentation, "
       "alarms), and why",
       Concat({kCommon, kMaintenance, {"endpoints", "cacert", "cert", "key", "write-out"}}), MaintenanceStatus},
      {"tls", "rotate-ca",
       "rotate the peer CA, and the client CA where its next/ is there, with no downtime: every node's quorate "
       "trusts old and new (a rolling restart), serves its new leaves, then trusts the new CAs only (a second "
       "rolling restart); the new CAs and leaves are read from next/ beside each file",
       Concat({kCommon, {"endpoints", "cacert", "cert", "key", "peer-trusted-ca-file"}}), TlsRotateCa},
      {"tls", "to-https",
       "move a running cluster's peers from plaintext to TLS with no downtime: every node's quorate listens on "
       "http and https (a rolling restart), lists its member at https://<host>:<--peer-https-port>, then listens on "
       "https only (a second rolling restart); each needs its peer TLS files (--peer-cert-file, --peer-key-file, "
       "--peer-trusted-ca-file) given to quorate run",
       Concat({kCommon, {"endpoints", "cacert", "cert", "key", "peer-https-port"}}), TlsToHttps},
      {"tls", "status", "where the CA rotation and the move to TLS are: each one's ID and each member's phase",
       Concat({kCommon, {"endpoints", "cacert", "cert", "key"}}), TlsStatus},
      {"backup", "save",
       "stream a snapshot of the cluster at --endpoints into --backup-to (compressed, encrypted with the first "
       "--backup-key-file); -w simple prints the new backup's URL alone on its last line",
       Concat({kCommon, kBackupStore, {"endpoints", "cacert", "cert", "key", "write-out", "backup-compression"}}),
       BackupSave},
      {"backup", "list", "the committed backups in --backup-to, oldest first",
       Concat({kCommon, kBackupStore, {"write-out"}}), BackupList},
      {"backup", "verify",
       "read backups whole: decrypt, decompress and check etcd's sha256 and the metadata; exit 1 for a damaged one, "
       "2 for a missing key",
       Concat({kCommon, kBackupStore, {"write-out"}}), BackupVerify, /*takes_extra=*/false, "BACKUP",
       "backup URLs as backup list prints them; none: the latest in --backup-to"},
      {nullptr, "recover",
       "on the one member whose data survived a lost majority: store its database as a backup in --backup-to "
       "(refused while the old cluster has a live quorum, unless --force); every node then restores it with "
       "run --restore-from and a new --initial-cluster-token",
       Concat({kCommon, kBackupStore,
               {"name", "data-dir", "state-dir", "from-member", "force", "backup-compression", "write-out", "etcd",
                "timeout",
                "peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "cacert", "cert", "key", "cert-file",
                "key-file", "trusted-ca-file"}}),
       Recover},
      {nullptr, "version", "print the versions of quorate, of the etcd it would run and of the cluster",
       Concat({kCommon,
               {"etcd", "write-out", "name", "data-dir", "state-dir", "peer-cert-file", "peer-key-file",
                "peer-trusted-ca-file"}}),
       Version},
  };
  return kCommands;
}

// `quorate discover --help-provider [NAME]`: the provider's keys as its table declares them, or with
// no NAME the providers there are.
int HelpProvider(const std::string& name) {
  const ProviderRegistry& registry = ProviderRegistry::Get();
  if (name.empty()) {
    std::cout << fmt::format("providers: {}\nquorate discover --help-provider NAME prints a provider's keys\n",
                             fmt::join(registry.Names(), ", "));
    return 0;
  }
  auto help = registry.Help(name);
  if (!help.ok()) return Fail(help.status());
  std::cout << *help;
  return 0;
}

std::string FullName(const Command& cmd) {
  return cmd.group ? std::string(cmd.group) + " " + cmd.name : std::string(cmd.name);
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

int RunCli(int argc, char** argv, std::string_view build_commit) {
  // gRPC's own c-ares resolver ignores /etc/hosts (and Kubernetes hostAliases); peers must resolve
  // the way etcd and the rest of the system do. An operator's explicit choice still wins.
  setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
  // OpenSSL writes to its socket with write(2), so a server that closed a TLS connection first
  // (an API server, S3, etcd) would kill quorate with SIGPIPE instead of failing that one call with
  // EPIPE. etcd is spawned with every signal back at its default.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"quorate: bootstrap etcd clusters all at once, and keep them whole", "quorate"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  // Everything after `--` is etcd's, untouched by our parser.
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      extra.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  std::map<std::string, std::map<std::string, std::string>> storage;  // command → key → value
  std::map<std::string, std::vector<CLI::Option*>> given;
  std::map<std::string, std::vector<std::string>> positionals;  // command → its positional arguments
  std::map<std::string, CLI::App*> subs;
  std::map<std::string, CLI::App*> groups;
  CLI::Option* help_provider = nullptr;
  std::string help_provider_name;
  for (const auto& cmd : Commands()) {
    CLI::App* parent = &app;
    if (cmd.group != nullptr) {
      if (!groups.count(cmd.group)) {
        groups[cmd.group] = app.add_subcommand(cmd.group, std::string(cmd.group) + " commands");
        groups[cmd.group]->require_subcommand(1);
      }
      parent = groups[cmd.group];
    }
    CLI::App* sub = parent->add_subcommand(cmd.name, cmd.help);
    subs[FullName(cmd)] = sub;
    const std::string name = FullName(cmd);
    for (const auto& key : cmd.keys) {
      const OptionDef* def = FindOption(key);
      std::string names = (key == "write-out" ? "-w,--" : "--") + key;
      std::string help = def->help;
      if (def->env != nullptr) help += fmt::format(" [env {}]", def->env);
      if (def->default_value != nullptr) help += fmt::format(" [default {}]", def->default_value);
      CLI::Option* opt = def->is_bool ? sub->add_flag(names + "{true}", storage[name][key], help)
                                      : sub->add_option(names, storage[name][key], help);
      given[name].push_back(opt);
    }
    if (cmd.positional != nullptr) sub->add_option(cmd.positional, positionals[name], cmd.positional_help);
    if (name == "discover") {
      // Help, not a setting: it reads no config and discovers nothing, so it is no row of the table.
      help_provider = sub->add_option("--help-provider", help_provider_name,
                                      "print the keys of provider NAME as a table; no NAME: the providers")
                          ->expected(0, 1)
                          ->type_name("[NAME]");
    }
  }
  // The command word, and under a group the word after it: "member remov" is as unknown as "memer".
  if (argc > 1 && argv[1][0] != '-') {
    std::string word = argv[1];
    bool grouped = groups.count(word) > 0 && argc > 2 && argv[2][0] != '-';
    if (grouped) word += std::string(" ") + argv[2];
    bool known = false;
    std::string best;
    size_t best_distance = 3;
    for (const auto& cmd : Commands()) {
      std::string candidate = grouped ? FullName(cmd) : std::string(cmd.group ? cmd.group : cmd.name);
      if (word == candidate) known = true;
      if (size_t d = EditDistance(word, candidate); d < best_distance) best_distance = d, best = candidate;
    }
    if (!known) {
      std::string hint = best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
      std::cerr << fmt::format("quorate: error: unknown command '{}'{}; see quorate --help\n", word, hint);
      return static_cast<int>(ExitCode::kBadInput);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::cerr << "quorate: error: " << what << "; see quorate --help\n";
    return static_cast<int>(ExitCode::kBadInput);
  }
  if (help_provider != nullptr && help_provider->count() > 0) return HelpProvider(help_provider_name);
  for (const auto& cmd : Commands()) {
    const std::string name = FullName(cmd);
    if (subs[name]->parsed() == false) continue;
    if (!extra.empty() && !cmd.takes_extra) {
      return Fail(Status::InvalidArgument(fmt::format("'quorate {}' takes no arguments after --", name)));
    }
    FlagValues flags;
    for (size_t i = 0; i < cmd.keys.size(); ++i) {
      if (given[name][i]->count() > 0) flags[cmd.keys[i]] = storage[name][cmd.keys[i]];
    }
    auto config = ResolveConfig(cmd.keys, flags, ProcessEnvironment());
    if (!config.ok()) return Fail(config.status());
    InitLogging(config->log_format, config->log_level);
    return cmd.run(*config, Words{positionals[name], extra, build_commit});
  }
  return Fail(Status::Internal("no command ran"));
}

}  // namespace quorate
