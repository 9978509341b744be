#include "node/rotation.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <fmt/ranges.h>

#include "core/json.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "tls/cert.h"

namespace quorate {
namespace {

constexpr int kPhaseLeaves = 2;
constexpr int kPhaseNew = 3;
constexpr int kMinHttpsPort = 1;
constexpr int kMaxHttpsPort = 65535;

// The rotation's ID. (Not the S3 signer's helper: a CA rotation has nothing to do with a store.)
std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// PEM files joined into one bundle: each ends its line, so the next BEGIN starts a line of its own.
std::string Joined(const std::string& a, const std::string& b) {
  std::string out = a;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + b;
}

// The flag's value in `argv`, in either spelling; empty when it is not there.
std::string GetFlag(const std::vector<std::string>& argv, const std::string& flag) {
  const std::string eq = "--" + flag + "=";
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind(eq, 0) == 0) return argv[i].substr(eq.size());
    if (argv[i] == "--" + flag && i + 1 < argv.size()) return argv[i + 1];
  }
  return "";
}

std::vector<std::string> SplitUrls(const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t comma = list.find(',', begin);
    if (comma == std::string::npos) comma = list.size();
    if (comma > begin) out.push_back(list.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return out;
}

// The https port of a move to TLS from its ID ("port 2381"); 0 when it is not one.
int PortOf(const std::string& id) {
  if (id.rfind("port ", 0) != 0) return 0;
  const std::string digits = id.substr(5);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  int port = std::stoi(digits);
  return port >= kMinHttpsPort && port <= kMaxHttpsPort ? port : 0;
}

// The peer TLS files a change needs, each named by its flag; empty when all are given.
std::string MissingPeerTls(const TlsFiles& tls, const std::string& change) {
  if (!tls.trusted_ca_file.empty() && !tls.cert_file.empty() && !tls.key_file.empty()) return "";
  return fmt::format("{} is of the peer TLS: give --peer-trusted-ca-file, --peer-cert-file and --peer-key-file",
                     change);
}

// Why `leaf_file` is not a leaf the CA in `ca_file` (`ca_what`, for the message) issued naming `urls`'s
// hosts (the peers would refuse it); empty when it is.
std::string LeafProblem(const std::string& ca_file, const std::string& ca_what, const std::string& leaf_file,
                        const std::vector<std::string>& urls, const std::string& fix) {
  auto ca = ReadCertFile(ca_file);
  auto leaf = ReadCertFile(leaf_file);
  if (!ca.ok()) return ca.status().message();
  if (!leaf.ok()) return leaf.status().message();
  if (leaf->issuer != ca->subject) {
    return fmt::format("{} is issued by {}, not by {} {}: {}", leaf_file, leaf->issuer, ca_what, ca->subject, fix);
  }
  if (Status names = CheckNames(*leaf, urls, leaf_file); !names.ok()) return names.message();
  return "";
}

// The flag's value in `argv` replaced by `value`, for both spellings etcd takes (--f=v, --f v).
void SetFlag(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  const std::string eq = "--" + flag + "=";
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind(eq, 0) == 0) argv[i] = eq + value;
    if (argv[i] == "--" + flag && i + 1 < argv.size()) argv[i + 1] = value;
  }
}

}  // namespace

RollingSpec CaRotationSpec() {
  RollingSpec spec;
  spec.plan.change = "CA rotation";
  spec.plan.initial = "old";
  // etcd reads its trusted CA file only at start, its leaves at every handshake.
  spec.plan.phases = {{"bundle", true}, {"leaves", false}, {"new", true}};
  spec.intent_key = kCaRotationIntentKey;
  spec.members_prefix = kCaRotationMembersPrefix;
  spec.local_file = "ca-rotation.json";
  spec.intent_id = CaRotationIntentId;
  return spec;
}

RollingSpec PeerHttpsSpec() {
  RollingSpec spec;
  spec.plan = PeerHttpsPlan();
  spec.intent_key = kPeerHttpsIntentKey;
  spec.members_prefix = kPeerHttpsMembersPrefix;
  spec.local_file = "peer-https.json";
  spec.intent_id = PeerHttpsIntentId;
  return spec;
}

std::string NextTlsPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "next/" + path;
  return path.substr(0, slash + 1) + "next/" + path.substr(slash + 1);
}

Result<std::string> CaFingerprint(const std::string& ca_file) {
  auto pem = ReadFile(ca_file);
  if (!pem.ok()) return pem.status();
  if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return Status::InvalidArgument(fmt::format("{} holds no PEM certificate; give the new CA's certificate", ca_file));
  }
  return Sha256Hex(*pem);
}

std::string CaRotationIntentValue(const std::string& id) { return JsonText(nlohmann::json{{"id", id}}); }

Result<std::string> CaRotationIntentId(const std::string& value) {
  auto doc = nlohmann::json::parse(value, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || !doc["id"].is_string()) {
    return Status::InvalidArgument(fmt::format("{} is not a CA rotation intent", kCaRotationIntentKey));
  }
  std::string id = doc["id"];
  if (id.size() != 64 || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{}: the id is not a sha256", kCaRotationIntentKey));
  }
  return id;
}

std::string PeerHttpsIntentValue(int https_port) { return JsonText(nlohmann::json{{"port", https_port}}); }

Result<std::string> PeerHttpsIntentId(const std::string& value) {
  auto doc = nlohmann::json::parse(value, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("port") || !doc["port"].is_number_integer()) {
    return Status::InvalidArgument(fmt::format("{} is not a move to TLS", kPeerHttpsIntentKey));
  }
  // Read wide and capped: a number past int's range would wrap into one that passes the check.
  const int64_t port = doc["port"].is_number_unsigned()
                           ? static_cast<int64_t>(std::min<uint64_t>(doc["port"].get<uint64_t>(), kMaxHttpsPort + 1u))
                           : doc["port"].get<int64_t>();
  if (port < kMinHttpsPort || port > kMaxHttpsPort) {
    return Status::InvalidArgument(fmt::format("{}: port {} is not a TCP port", kPeerHttpsIntentKey, port));
  }
  return PeerHttpsId(static_cast<int>(port));
}

std::string PeerHttpsId(int https_port) { return fmt::format("port {}", https_port); }

Result<RollingReport> ParseRollingReport(const std::string& value, const RollingPlan& plan) {
  auto doc = nlohmann::json::parse(value, nullptr, false);
  RollingReport r;
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || !doc["id"].is_string() ||
      !doc.contains("phase") || !doc["phase"].is_number_integer() || !doc.contains("name") ||
      !doc["name"].is_string()) {
    return Status::InvalidArgument(fmt::format("not a {} record", plan.change));
  }
  r.name = doc["name"];
  r.id = doc["id"];
  r.phase = doc["phase"];
  if (r.phase < 0 || r.phase > plan.last()) {
    return Status::InvalidArgument(fmt::format("a {} record with no such phase", plan.change));
  }
  return r;
}

bool RollingView::done() const {
  if (id.empty()) return true;
  return std::all_of(members.begin(), members.end(), [&](const auto& m) { return m.second >= last; });
}

namespace {

// Each member's phase of change `id` as its records in etcd say; a record under another member's key
// or of another intent does not count.
Result<std::map<std::string, int>> ReadReports(EtcdClient& client, const RollingSpec& spec, const std::string& id) {
  auto records = client.GetPrefix(spec.members_prefix);
  if (!records.ok()) return records.status();
  std::map<std::string, int> reported;
  for (const KeyValue& kv : *records) {
    auto r = ParseRollingReport(kv.value, spec.plan);
    if (r.ok() && r->id == id && kv.key == spec.members_prefix + r->name) reported[r->name] = r->phase;
  }
  return reported;
}

}  // namespace

Result<RollingView> ReadRolling(EtcdClient& client, const RollingSpec& spec) {
  RollingView view;
  view.last = spec.plan.last();
  auto intent = client.Get(spec.intent_key);
  if (!intent.ok()) return intent.status();
  if (!intent->has_value()) return view;
  auto id = spec.intent_id(**intent);
  if (!id.ok()) return id.status();
  view.id = *id;
  auto reported = ReadReports(client, spec, view.id);
  if (!reported.ok()) return reported.status();
  auto listing = client.MemberList();
  if (!listing.ok()) return listing.status();
  for (const ClusterMember& m : listing->members) {
    auto it = reported->find(m.name);
    view.members.emplace_back(m.name.empty() ? IdToHex(m.id) : m.name, it == reported->end() ? 0 : it->second);
  }
  return view;
}

std::string FormatRolling(const RollingSpec& spec, const RollingView& view) {
  if (view.id.empty()) return spec.plan.change + ": none asked\n";
  std::string out =
      fmt::format("{} {}: {}\n", spec.plan.change, view.id.substr(0, 12), view.done() ? "done" : "under way");
  for (const auto& [name, phase] : view.members) out += fmt::format("{}\t{}\n", name, spec.plan.PhaseName(phase));
  return out;
}

Result<RollingView> ReadCaRotation(EtcdClient& client) { return ReadRolling(client, CaRotationSpec()); }

std::string FormatCaRotation(const RollingView& view) { return FormatRolling(CaRotationSpec(), view); }

namespace {

// Asks for change `spec` with intent `value` of ID `id`, unless it or the other change is under way.
Status AskRolling(EtcdClient& client, const RollingSpec& spec, const RollingSpec& other, const std::string& id,
                  const std::string& value) {
  auto view = ReadRolling(client, spec);
  if (!view.ok()) return view.status();
  if (view->id == id) return Status::Ok();
  if (!view->done()) {
    return Status::FailedPrecondition(fmt::format(
        "the {} {} is under way; let it finish (quorate tls status) before asking for another", spec.plan.change,
        view->id.substr(0, 12)));
  }
  auto others = ReadRolling(client, other);
  if (!others.ok()) return others.status();
  if (!others->done()) {
    return Status::FailedPrecondition(fmt::format(
        "the {} {} is under way; let it finish (quorate tls status) before asking for the {}: each restarts "
        "members one at a time on its own count",
        other.plan.change, others->id.substr(0, 12), spec.plan.change));
  }
  return client.Put(spec.intent_key, value);
}

}  // namespace

Status AskCaRotation(EtcdClient& client, const std::string& id) {
  return AskRolling(client, CaRotationSpec(), PeerHttpsSpec(), id, CaRotationIntentValue(id));
}

Status AskPeerHttps(EtcdClient& client, int https_port) {
  const std::string value = PeerHttpsIntentValue(https_port);
  // The port as etcd will read it back: one no intent can hold is refused here, not by every node.
  if (auto id = PeerHttpsIntentId(value); !id.ok()) return id.status();
  return AskRolling(client, PeerHttpsSpec(), CaRotationSpec(), PeerHttpsId(https_port), value);
}

RollingLocal LoadRollingLocal(const std::string& state_dir, const RollingSpec& spec) {
  RollingLocal local;
  auto text = ReadFile(state_dir + "/tls/" + spec.local_file);
  if (!text.ok()) return local;
  auto doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.value("id", nlohmann::json()).is_string() ||
      !doc.value("phase", nlohmann::json()).is_number_integer()) {
    return local;
  }
  local.id = doc["id"];
  local.phase = std::clamp(doc["phase"].get<int>(), 0, spec.plan.last());
  return local;
}

PeerHttpsState LoadPeerHttps(const std::string& state_dir) {
  RollingLocal local = LoadRollingLocal(state_dir, PeerHttpsSpec());
  PeerHttpsState state;
  state.port = PortOf(local.id);
  // A record without a port it could move to is no move: etcd keeps the operator's URLs.
  state.phase = state.port == 0 ? 0 : local.phase;
  return state;
}

Result<int> DonePeerHttpsPort(EtcdClient& client) {
  auto view = ReadRolling(client, PeerHttpsSpec());
  if (!view.ok()) return view.status();
  return !view->id.empty() && view->done() ? PortOf(view->id) : 0;
}

namespace {

Status SaveRollingLocal(const std::string& state_dir, const RollingSpec& spec, const RollingLocal& local) {
  const std::string dir = state_dir + "/tls";
  if (Status s = MakeDirs(dir); !s.ok()) return s;
  return WriteFileAtomic(dir + "/" + spec.local_file,
                         JsonText(nlohmann::json{{"id", local.id}, {"phase", local.phase}}) + "\n", 0600);
}

}  // namespace

Status SavePeerHttpsDone(const std::string& state_dir, int https_port) {
  const RollingSpec spec = PeerHttpsSpec();
  return SaveRollingLocal(state_dir, spec, {PeerHttpsId(https_port), spec.plan.last()});
}

RollingChange::RollingChange(const Config& config, RollingSpec spec, std::function<void()> restart_etcd)
    : config_(config), spec_(std::move(spec)), dir_(config.state_dir + "/tls"), restart_etcd_(std::move(restart_etcd)) {}

RollingDecision RollingChange::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

Status RollingChange::SaveLocal(const RollingLocal& local) const {
  return SaveRollingLocal(config_.state_dir, spec_, local);
}

void RollingChange::Round(EtcdClient& client, const Member& self) {
  const RollingPlan& plan = spec_.plan;
  const std::string& self_name = self.name;
  auto intent = client.Get(spec_.intent_key);
  if (!intent.ok()) {
    spdlog::debug("{}: no round: {}", plan.change, intent.status().message());
    return;
  }
  const RollingLocal local = LoadLocal();
  RollingFacts f;
  f.self = self_name;
  f.intent = intent->has_value();
  std::string id;
  if (f.intent) {
    auto parsed = spec_.intent_id(**intent);
    if (!parsed.ok()) {
      f.intent = false;
      f.material_problem = parsed.status().message();
    } else {
      id = *parsed;
    }
  }
  f.local = f.intent && local.id == id ? local.phase : (f.intent ? 0 : local.phase);
  // Done here and said so: the members' records are no longer this node's business, and a round a
  // second would only ask every member's status for nothing.
  if (f.intent && id == done_id_ && f.local == plan.last()) return;
  if (f.intent) {
    f.material_problem = MaterialProblem(id, local, self);
    auto reported = ReadReports(client, spec_, id);
    auto listing = client.MemberList();
    if (!reported.ok() || !listing.ok()) {
      spdlog::debug("{}: no round: {}", plan.change, (!reported.ok() ? reported.status() : listing.status()).message());
      return;
    }
    for (const ClusterMember& m : listing->members) {
      RollingMember rm;
      rm.id = m.id;
      rm.name = m.name;
      rm.is_learner = m.is_learner;
      if (auto it = reported->find(m.name); it != reported->end()) rm.reported = it->second;
      if (!m.client_urls.empty()) {
        auto st = client.EndpointStatusOf(m.client_urls.front());
        // Only as itself: a member replaced at the same URLs (rule 4) answers there under a new ID.
        if (st.ok() && st->member_id == m.id) {
          rm.answered = true;
          rm.has_leader = st->leader != 0;
          rm.alarmed = !st->errors.empty();
          rm.raft_index = st->raft_index;
          rm.applied_index = st->raft_applied_index;
        }
      }
      f.members.push_back(rm);
    }
  }
  RollingDecision d = DecideRolling(plan, f);
  {
    std::lock_guard lock(mu_);
    last_ = d;
  }
  if (d.action == RollingAction::kNone && f.intent && d.phase == plan.last()) {
    auto me = std::find_if(f.members.begin(), f.members.end(), [&](const auto& m) { return m.name == self_name; });
    bool everyone = std::all_of(f.members.begin(), f.members.end(), [&](const auto& m) { return m.reported == plan.last(); });
    if (me != f.members.end() && everyone) done_id_ = id;
  }
  std::string said = fmt::format("{}: {} {} (rule {}): {}", plan.change, RollingActionName(d.action),
                                 plan.PhaseName(d.phase), d.rule, d.reason);
  if (said != said_) spdlog::info("{}", said);
  said_ = said;

  switch (d.action) {
    case RollingAction::kNone:
    case RollingAction::kWait:
      return;
    case RollingAction::kReport: {
      nlohmann::json record = {{"name", self_name}, {"id", id}, {"phase", d.phase}};
      Status s = client.Put(spec_.members_prefix + self_name, JsonText(record));
      if (!s.ok()) spdlog::warn("{}: phase {} not said: {}", plan.change, plan.PhaseName(d.phase), s.message());
      return;
    }
    case RollingAction::kApply:
    case RollingAction::kRestart: {
      // The files first, then the record, then the restart: a quorate killed in between starts etcd
      // on the record, which never names files not yet written.
      Status s = Prepare(d.phase);
      if (s.ok()) s = SaveLocal({id, d.phase});
      if (!s.ok()) {
        spdlog::warn("{}: phase {} not taken: {}", plan.change, plan.PhaseName(d.phase), s.message());
        return;
      }
      if (d.action == RollingAction::kRestart) {
        spdlog::info("{}: restarting etcd for phase {}", plan.change, plan.PhaseName(d.phase));
        restart_etcd_();
      } else {
        TakeLive(client, self, {id, d.phase});
      }
      return;
    }
  }
}

namespace {

// One side of etcd's TLS a CA rotation carries: its flags, the operator's files, quorate's copies in
// <state-dir>/tls, and the URLs its leaf must name.
struct RotatedSide {
  const char* name;  // "peer", "client": for messages
  bool asked;        // its new CA is the one rotate-ca names (the peer's): its fingerprint is the rotation's ID
  const char* ca_flag;
  const char* cert_flag;
  const char* key_flag;
  const char* ca_copy;
  const char* cert_copy;
  const char* key_copy;
  TlsFiles files;
  std::vector<std::string> urls;
};

RotatedSide PeerSide(const Config& c, const Member& self) {
  return {"peer", true, "peer-trusted-ca-file", "peer-cert-file", "peer-key-file", "peer-ca.crt", "peer.crt", "peer.key",
          c.peer_tls, self.peer_urls};
}

RotatedSide ClientSide(const Config& c, const Member& self) {
  return {"client", false, "trusted-ca-file", "cert-file", "key-file", "client-ca.crt", "client.crt", "client.key",
          c.client_tls, self.client_urls};
}

// The client side takes part in a rotation when etcd is given a client CA and the operator put the next
// one beside it: a cluster whose clients keep their CA rotates the peers' alone.
bool ClientRotates(const Config& c) {
  return !c.client_tls.trusted_ca_file.empty() && PathExists(NextTlsPath(c.client_tls.trusted_ca_file));
}

// The sides this node rotates: the peer's always (rotate-ca names its CA), the client's as ClientRotates says.
std::vector<RotatedSide> Sides(const Config& c, const Member& self) {
  std::vector<RotatedSide> sides = {PeerSide(c, self)};
  if (ClientRotates(c)) sides.push_back(ClientSide(c, self));
  return sides;
}

// Once done, whether the operator has put the new CA of `side` in place of the old (etcd then starts on
// the operator's files again): the peer's by the rotation's ID, the client's by its next/ file's content.
bool InPlace(const RotatedSide& side, const std::string& id) {
  if (side.asked) {
    auto current = CaFingerprint(side.files.trusted_ca_file);
    return current.ok() && *current == id;
  }
  auto current = ReadFile(side.files.trusted_ca_file);
  auto next = ReadFile(NextTlsPath(side.files.trusted_ca_file));
  return current.ok() && next.ok() && *current == *next;
}

// Why `side` cannot take rotation `id` from `local`; empty when it can.
std::string SideProblem(const RotatedSide& side, const std::string& id, const RollingLocal& local,
                        const std::string& dir) {
  const TlsFiles& tls = side.files;
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return fmt::format("a CA rotation of the {} side needs its leaf: give --{} and --{} beside --{}", side.name,
                       side.cert_flag, side.key_flag, side.ca_flag);
  }
  // A rotation started on top of an earlier one that is not finished, or whose CA the operator has not
  // put in place of the old: the "old" half of the bundle would not be what etcd trusts now.
  if (local.id != id && local.phase > 0) {
    bool finished = local.phase >= kPhaseNew;
    bool moved = true;
    if (side.asked) {
      auto current = CaFingerprint(tls.trusted_ca_file);
      moved = current.ok() && *current == local.id;
    } else if (auto copy = ReadFile(dir + "/" + side.ca_copy); copy.ok()) {
      auto current = ReadFile(tls.trusted_ca_file);
      moved = current.ok() && *current == *copy;
    }
    if (!finished || !moved) {
      return fmt::format("the earlier CA rotation {} is {} here: copy {} over {} (and the leaves likewise) first",
                         local.id.substr(0, 12), finished ? "not put in place" : "not finished",
                         NextTlsPath(tls.trusted_ca_file), tls.trusted_ca_file);
    }
  }
  auto next = CaFingerprint(NextTlsPath(tls.trusted_ca_file));
  if (!next.ok()) return next.status().message() + "; put the new CA's certificate there, beside the old";
  // rotate-ca names the peers' new CA; the client side's may be another.
  if (side.asked && *next != id) {
    return fmt::format("{} is not the CA the rotation was asked for (sha256 {}, asked {})",
                       NextTlsPath(tls.trusted_ca_file), next->substr(0, 12), id.substr(0, 12));
  }
  // The old CA is half of the bundle, and the old leaf is served until the leaves' phase.
  for (const std::string& f : {tls.trusted_ca_file, tls.cert_file, tls.key_file}) {
    if (local.id == id && local.phase >= kPhaseLeaves) break;
    if (auto read = ReadFile(f); !read.ok()) return read.status().message();
  }
  for (const std::string& f : {tls.cert_file, tls.key_file}) {
    if (auto read = ReadFile(NextTlsPath(f)); !read.ok()) {
      return read.status().message() + fmt::format("; put this node's new {} leaf there, issued by the new CA",
                                                   side.name);
    }
  }
  // A leaf the peers (or clients) will refuse would cut this node off at the leaves' phase: checked
  // before any restart. (The key matching the certificate is etcd's to check at start.)
  return LeafProblem(NextTlsPath(tls.trusted_ca_file), fmt::format("the new {} CA", side.name),
                     NextTlsPath(tls.cert_file), side.urls, "issue it from the new CA");
}

// quorate's copies of `side`'s files for `phase` written in `dir`: the bundle (old and new CA) until
// `new`, then the new CA alone; the old leaf until `leaves`, then the new one.
Status PrepareSide(const RotatedSide& side, int phase, const std::string& dir) {
  const TlsFiles& tls = side.files;
  auto old_ca = ReadFile(tls.trusted_ca_file);
  auto new_ca = ReadFile(NextTlsPath(tls.trusted_ca_file));
  const bool new_leaves = phase >= kPhaseLeaves;
  auto cert = ReadFile(new_leaves ? NextTlsPath(tls.cert_file) : tls.cert_file);
  auto key = ReadFile(new_leaves ? NextTlsPath(tls.key_file) : tls.key_file);
  for (const auto* r : {&new_ca, &cert, &key}) {
    if (!r->ok()) return r->status();
  }
  std::string ca;
  if (phase == kPhaseNew) {
    ca = *new_ca;
  } else {
    if (!old_ca.ok()) return old_ca.status();
    ca = Joined(*old_ca, *new_ca);
  }
  if (Status s = MakeDirs(dir); !s.ok()) return s;
  if (auto w = WriteFileIfChanged(dir + "/" + side.ca_copy, ca, 0644); !w.ok()) return w.status();
  // The key, then the certificate: each by rename, which etcd reads at its next handshake. One made
  // between the two renames meets a key that is not the certificate's and fails; the dialer tries again.
  if (auto w = WriteFileIfChanged(dir + "/" + side.key_copy, *key, 0600); !w.ok()) return w.status();
  if (auto w = WriteFileIfChanged(dir + "/" + side.cert_copy, *cert, 0644); !w.ok()) return w.status();
  return Status::Ok();
}

}  // namespace

CaRotationChange::CaRotationChange(const Config& config, std::function<void()> restart_etcd)
    : RollingChange(config, CaRotationSpec(), std::move(restart_etcd)) {}

std::string CaRotationChange::MaterialProblem(const std::string& id, const RollingLocal& local,
                                              const Member& self) const {
  if (std::string missing = MissingPeerTls(config_.peer_tls, "a CA rotation"); !missing.empty()) return missing;
  for (const RotatedSide& side : Sides(config_, self)) {
    if (std::string problem = SideProblem(side, id, local, dir_); !problem.empty()) return problem;
  }
  return "";
}

Status CaRotationChange::Prepare(int phase) const {
  // The leaf names are R5's business; the files are the same whatever the URLs.
  for (const RotatedSide& side : Sides(config_, Member{})) {
    if (Status s = PrepareSide(side, phase, dir_); !s.ok()) return s;
  }
  return Status::Ok();
}

void CaRotationChange::TakeLive(EtcdClient&, const Member&, const RollingLocal&) {
  // Prepare put them in place; etcd reads them at its next handshake, quorate's own client when upkeep
  // makes it again (OwnClientTls).
  spdlog::info("CA rotation: the leaves of the new CA are in place for etcd's next handshakes");
}

std::vector<std::string> CaRotationChange::EtcdArgv(std::vector<std::string> argv) const {
  const RollingLocal local = LoadLocal();
  if (local.phase == 0) return argv;
  for (const RotatedSide& side : Sides(config_, Member{})) {
    if (local.phase == kPhaseNew && InPlace(side, local.id)) continue;
    if (Status s = PrepareSide(side, local.phase, dir_); !s.ok()) {
      // What was written before the phase was recorded is still there; a file lost since makes etcd
      // say so at start, naming it.
      spdlog::warn("CA rotation: the {} files of phase {} not written again: {}", side.name,
                   spec_.plan.PhaseName(local.phase), s.message());
    }
    SetFlag(argv, side.ca_flag, dir_ + "/" + side.ca_copy);
    SetFlag(argv, side.cert_flag, dir_ + "/" + side.cert_copy);
    SetFlag(argv, side.key_flag, dir_ + "/" + side.key_copy);
  }
  return argv;
}

OwnClientTls CaRotationChange::ClientTls(TlsFiles base) const {
  const RollingLocal local = LoadLocal();
  if (local.phase == 0 || !ClientRotates(config_)) return {base, ""};
  const RotatedSide side = ClientSide(config_, Member{});
  if (local.phase == kPhaseNew && InPlace(side, local.id)) return {base, ""};
  // What etcd's client side trusts and serves, quorate's client trusts and presents: the bundle verifies
  // a member's leaf of either CA, and the leaf is the one every member accepts at this phase (R6 keeps
  // them within one phase: the old until `leaves`, when every member trusts the bundle; the new after).
  if (base.trusted_ca_file == side.files.trusted_ca_file) base.trusted_ca_file = dir_ + "/" + side.ca_copy;
  if (base.cert_file == side.files.cert_file && base.key_file == side.files.key_file) {
    base.cert_file = dir_ + "/" + side.cert_copy;
    base.key_file = dir_ + "/" + side.key_copy;
  }
  return {base, fmt::format("{} {}", local.id, spec_.plan.PhaseName(local.phase))};
}

PeerHttpsChange::PeerHttpsChange(const Config& config, std::function<void()> restart_etcd)
    : RollingChange(config, PeerHttpsSpec(), std::move(restart_etcd)) {}

std::string PeerHttpsChange::MaterialProblem(const std::string& id, const RollingLocal& local,
                                             const Member& self) const {
  const TlsFiles& tls = config_.peer_tls;
  if (std::string missing = MissingPeerTls(tls, "the move to TLS"); !missing.empty()) return missing;
  // One move at a time: etcd listens on what the record it is at says, for one port.
  if (local.id != id && local.phase > 0 && local.phase < spec_.plan.last()) {
    return fmt::format("this node is part way through the move to TLS {} ({}); ask for that one again",
                       local.id, spec_.plan.PhaseName(local.phase));
  }
  if (auto key = ReadFile(tls.key_file); !key.ok()) return key.status().message();
  // A leaf the peers refuse, or one that does not name the host they dial, would cut this node off at
  // `https`: checked before the first restart.
  const int port = PortOf(id);
  return LeafProblem(tls.trusted_ca_file, "the CA of --peer-trusted-ca-file", tls.cert_file,
                     AdvertisedPeerUrlsAtPhase(self.peer_urls, port, kHttpsPhaseHttps),
                     "issue it from the CA of --peer-trusted-ca-file");
}

void PeerHttpsChange::TakeLive(EtcdClient& client, const Member& self, const RollingLocal& local) {
  // The membership lists this member at its https twins from now on: the peers, which trust the CA
  // since `both`, dial it there. Upkeep's round keeps it so (a failure here is made good there).
  const std::vector<std::string> urls = AdvertisedPeerUrlsAtPhase(self.peer_urls, PortOf(local.id), local.phase);
  auto listing = client.MemberList();
  if (!listing.ok()) {
    spdlog::warn("peer TLS: {} not yet listed at {}: {}", self.name, fmt::join(urls, ","),
                 listing.status().message());
    return;
  }
  for (const ClusterMember& m : listing->members) {
    if (m.name != self.name) continue;
    Status s = client.MemberUpdate(m.id, urls);
    spdlog::info("peer TLS: {} listed at {}: MemberUpdate {}", self.name, fmt::join(urls, ","),
                 s.ok() ? "done" : "failed: " + s.message());
  }
}

std::vector<std::string> PeerHttpsChange::AdvertisedPeerUrls(const std::vector<std::string>& urls) const {
  const PeerHttpsState state = LoadPeerHttps(config_.state_dir);
  return AdvertisedPeerUrlsAtPhase(urls, state.port, state.phase);
}

std::vector<std::string> PeerHttpsChange::EtcdArgv(std::vector<std::string> argv) const {
  const PeerHttpsState state = LoadPeerHttps(config_.state_dir);
  if (state.phase == 0) return argv;
  for (const char* flag : {"listen-peer-urls", "initial-advertise-peer-urls"}) {
    const std::vector<std::string> urls = SplitUrls(GetFlag(argv, flag));
    if (urls.empty()) continue;
    const bool listen = std::string(flag) == "listen-peer-urls";
    SetFlag(argv, flag,
            fmt::format("{}", fmt::join(listen ? PeerUrlsAtPhase(urls, state.port, state.phase)
                                               : AdvertisedPeerUrlsAtPhase(urls, state.port, state.phase),
                                        ",")));
  }
  return argv;
}

RollingChanges::RollingChanges(const Config& config, std::function<void()> restart_etcd)
    : ca_(config, restart_etcd), https_(config, restart_etcd) {}

std::vector<std::string> RollingChanges::EtcdArgv(std::vector<std::string> argv) const {
  return ca_.EtcdArgv(https_.EtcdArgv(std::move(argv)));
}

OwnClientTls RollingChanges::ClientTls(const TlsFiles& base) const { return ca_.ClientTls(base); }

void RollingChanges::Round(EtcdClient& client, const Member& self) {
  ca_.Round(client, self);
  https_.Round(client, self);
}

}  // namespace quorate
