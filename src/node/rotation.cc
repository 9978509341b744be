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

constexpr const char* kLocalFile = "ca-rotation.json";
constexpr const char* kCaFile = "peer-ca.crt";
constexpr const char* kCertFile = "peer.crt";
constexpr const char* kKeyFile = "peer.key";
constexpr int kPhaseLeaves = 2;
constexpr int kPhaseNew = 3;

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

// The flag's value in `argv` replaced by `value`, for both spellings etcd takes (--f=v, --f v).
void SetFlag(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  const std::string eq = "--" + flag + "=";
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind(eq, 0) == 0) argv[i] = eq + value;
    if (argv[i] == "--" + flag && i + 1 < argv.size()) argv[i + 1] = value;
  }
}

}  // namespace

RollingPlan CaRotationPlan() {
  RollingPlan plan;
  plan.change = "CA rotation";
  plan.initial = "old";
  // etcd reads its trusted CA file only at start, its leaves at every handshake.
  plan.phases = {{"bundle", true}, {"leaves", false}, {"new", true}};
  return plan;
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

Result<CaRotationReport> ParseCaRotationReport(const std::string& value) {
  auto doc = nlohmann::json::parse(value, nullptr, false);
  CaRotationReport r;
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || !doc["id"].is_string() ||
      !doc.contains("phase") || !doc["phase"].is_number_integer() || !doc.contains("name") ||
      !doc["name"].is_string()) {
    return Status::InvalidArgument("not a CA rotation record");
  }
  r.name = doc["name"];
  r.id = doc["id"];
  r.phase = doc["phase"];
  if (r.phase < 0 || r.phase > kPhaseNew) return Status::InvalidArgument("a CA rotation record with no such phase");
  return r;
}

bool CaRotationView::done() const {
  if (id.empty()) return true;
  return std::all_of(members.begin(), members.end(), [](const auto& m) { return m.second >= kPhaseNew; });
}

Result<CaRotationView> ReadCaRotation(EtcdClient& client) {
  CaRotationView view;
  auto intent = client.Get(kCaRotationIntentKey);
  if (!intent.ok()) return intent.status();
  if (!intent->has_value()) return view;
  auto id = CaRotationIntentId(**intent);
  if (!id.ok()) return id.status();
  view.id = *id;
  auto records = client.GetPrefix(kCaRotationMembersPrefix);
  if (!records.ok()) return records.status();
  auto listing = client.MemberList();
  if (!listing.ok()) return listing.status();
  std::map<std::string, int> reported;
  for (const KeyValue& kv : *records) {
    auto r = ParseCaRotationReport(kv.value);
    if (r.ok() && r->id == view.id && kv.key == kCaRotationMembersPrefix + r->name) reported[r->name] = r->phase;
  }
  for (const ClusterMember& m : listing->members) {
    auto it = reported.find(m.name);
    view.members.emplace_back(m.name.empty() ? IdToHex(m.id) : m.name, it == reported.end() ? 0 : it->second);
  }
  return view;
}

Status AskCaRotation(EtcdClient& client, const std::string& id) {
  auto view = ReadCaRotation(client);
  if (!view.ok()) return view.status();
  if (view->id == id) return Status::Ok();
  if (!view->done()) {
    return Status::FailedPrecondition(fmt::format(
        "the CA rotation {} is under way; let it finish (quorate tls status) before asking for another",
        view->id.substr(0, 12)));
  }
  return client.Put(kCaRotationIntentKey, CaRotationIntentValue(id));
}

std::string FormatCaRotation(const CaRotationView& view) {
  if (view.id.empty()) return "CA rotation: none asked\n";
  RollingPlan plan = CaRotationPlan();
  std::string out = fmt::format("CA rotation {}: {}\n", view.id.substr(0, 12), view.done() ? "done" : "under way");
  for (const auto& [name, phase] : view.members) out += fmt::format("{}\t{}\n", name, plan.PhaseName(phase));
  return out;
}

CaRotation::CaRotation(const Config& config, std::function<void()> restart_etcd)
    : config_(config), restart_etcd_(std::move(restart_etcd)), plan_(CaRotationPlan()), dir_(config.state_dir + "/tls") {}

RollingDecision CaRotation::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

CaRotation::Local CaRotation::LoadLocal() const {
  Local local;
  auto text = ReadFile(dir_ + "/" + kLocalFile);
  if (!text.ok()) return local;
  auto doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.value("id", nlohmann::json()).is_string() ||
      !doc.value("phase", nlohmann::json()).is_number_integer()) {
    return local;
  }
  local.id = doc["id"];
  local.phase = std::clamp(doc["phase"].get<int>(), 0, kPhaseNew);
  return local;
}

Status CaRotation::SaveLocal(const Local& local) const {
  if (Status s = MakeDirs(dir_); !s.ok()) return s;
  return WriteFileAtomic(dir_ + "/" + kLocalFile,
                         JsonText(nlohmann::json{{"id", local.id}, {"phase", local.phase}}) + "\n", 0600);
}

std::string CaRotation::MaterialProblem(const std::string& id, const Local& local,
                                        const std::vector<std::string>& peer_urls) const {
  const TlsFiles& tls = config_.peer_tls;
  if (tls.trusted_ca_file.empty() || tls.cert_file.empty() || tls.key_file.empty()) {
    return "a CA rotation is of the peer TLS: give --peer-trusted-ca-file, --peer-cert-file and --peer-key-file";
  }
  // A rotation started on top of an earlier one that is not finished, or whose CA the operator has not
  // put in place of the old: the "old" half of the bundle would not be what etcd trusts now.
  if (local.id != id && local.phase > 0) {
    auto current = CaFingerprint(tls.trusted_ca_file);
    if (local.phase < kPhaseNew || !current.ok() || *current != local.id) {
      return fmt::format("the earlier CA rotation {} is {} here: copy {} over {} (and the leaves likewise) first",
                         local.id.substr(0, 12), local.phase < kPhaseNew ? "not finished" : "not put in place",
                         NextTlsPath(tls.trusted_ca_file), tls.trusted_ca_file);
    }
  }
  auto next = CaFingerprint(NextTlsPath(tls.trusted_ca_file));
  if (!next.ok()) return next.status().message() + "; put the new CA's certificate there, beside the old";
  if (*next != id) {
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
      return read.status().message() + "; put this node's new leaf there, issued by the new CA";
    }
  }
  // A leaf the peers will refuse would cut this node off at the leaves' phase: checked before any
  // restart. (The key matching the certificate is etcd's to check at start.)
  const std::string next_leaf = NextTlsPath(tls.cert_file);
  auto ca = ReadCertFile(NextTlsPath(tls.trusted_ca_file));
  auto leaf = ReadCertFile(next_leaf);
  if (!ca.ok()) return ca.status().message();
  if (!leaf.ok()) return leaf.status().message();
  if (leaf->issuer != ca->subject) {
    return fmt::format("{} is issued by {}, not by the new CA {}: issue it from the new CA", next_leaf, leaf->issuer,
                       ca->subject);
  }
  if (Status names = CheckNames(*leaf, peer_urls, next_leaf); !names.ok()) return names.message();
  return "";
}

Status CaRotation::WriteMaterial(int phase) const {
  const TlsFiles& tls = config_.peer_tls;
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
  if (Status s = MakeDirs(dir_); !s.ok()) return s;
  if (auto w = WriteFileIfChanged(dir_ + "/" + kCaFile, ca, 0644); !w.ok()) return w.status();
  // The key, then the certificate: each by rename, which etcd reads at its next handshake. One made
  // between the two renames meets a key that is not the certificate's and fails; raft's transport
  // dials again.
  if (auto w = WriteFileIfChanged(dir_ + "/" + kKeyFile, *key, 0600); !w.ok()) return w.status();
  if (auto w = WriteFileIfChanged(dir_ + "/" + kCertFile, *cert, 0644); !w.ok()) return w.status();
  return Status::Ok();
}

std::vector<std::string> CaRotation::EtcdArgv(std::vector<std::string> argv) const {
  const Local local = LoadLocal();
  if (local.phase == 0) return argv;
  if (local.phase == kPhaseNew) {
    auto current = CaFingerprint(config_.peer_tls.trusted_ca_file);
    if (current.ok() && *current == local.id) return argv;
  }
  if (Status s = WriteMaterial(local.phase); !s.ok()) {
    // What was written before the phase was recorded is still there; a file lost since makes etcd
    // say so at start, naming it.
    spdlog::warn("CA rotation: the files of phase {} not written again: {}", plan_.PhaseName(local.phase),
                 s.message());
  }
  SetFlag(argv, "peer-trusted-ca-file", dir_ + "/" + kCaFile);
  SetFlag(argv, "peer-cert-file", dir_ + "/" + kCertFile);
  SetFlag(argv, "peer-key-file", dir_ + "/" + kKeyFile);
  return argv;
}

void CaRotation::Round(EtcdClient& client, const Member& self) {
  const std::string& self_name = self.name;
  auto intent = client.Get(kCaRotationIntentKey);
  if (!intent.ok()) {
    spdlog::debug("CA rotation: no round: {}", intent.status().message());
    return;
  }
  const Local local = LoadLocal();
  RollingFacts f;
  f.self = self_name;
  f.intent = intent->has_value();
  std::string id;
  if (f.intent) {
    auto parsed = CaRotationIntentId(**intent);
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
  if (f.intent && id == done_id_ && f.local == plan_.last()) return;
  if (f.intent) {
    f.material_problem = MaterialProblem(id, local, self.peer_urls);
    auto records = client.GetPrefix(kCaRotationMembersPrefix);
    auto listing = client.MemberList();
    if (!records.ok() || !listing.ok()) {
      spdlog::debug("CA rotation: no round: {}",
                    (!records.ok() ? records.status() : listing.status()).message());
      return;
    }
    std::map<std::string, int> reported;
    for (const KeyValue& kv : *records) {
      auto r = ParseCaRotationReport(kv.value);
      if (r.ok() && r->id == id && kv.key == kCaRotationMembersPrefix + r->name) reported[r->name] = r->phase;
    }
    for (const ClusterMember& m : listing->members) {
      RollingMember rm;
      rm.id = m.id;
      rm.name = m.name;
      rm.is_learner = m.is_learner;
      if (auto it = reported.find(m.name); it != reported.end()) rm.reported = it->second;
      if (!m.client_urls.empty()) {
        auto st = client.EndpointStatusOf(m.client_urls.front());
        if (st.ok()) {
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
  RollingDecision d = DecideRolling(plan_, f);
  {
    std::lock_guard lock(mu_);
    last_ = d;
  }
  if (d.action == RollingAction::kNone && f.intent && d.phase == plan_.last()) {
    auto self = std::find_if(f.members.begin(), f.members.end(), [&](const auto& m) { return m.name == self_name; });
    bool everyone = std::all_of(f.members.begin(), f.members.end(), [&](const auto& m) { return m.reported == plan_.last(); });
    if (self != f.members.end() && everyone) done_id_ = id;
  }
  std::string said = fmt::format("CA rotation: {} {} (rule {}): {}", RollingActionName(d.action),
                                 plan_.PhaseName(d.phase), d.rule, d.reason);
  if (said != said_) spdlog::info("{}", said);
  said_ = said;

  switch (d.action) {
    case RollingAction::kNone:
    case RollingAction::kWait:
      return;
    case RollingAction::kReport: {
      nlohmann::json record = {{"name", self_name}, {"id", id}, {"phase", d.phase}};
      Status s = client.Put(kCaRotationMembersPrefix + self_name, JsonText(record));
      if (!s.ok()) spdlog::warn("CA rotation: phase {} not said: {}", plan_.PhaseName(d.phase), s.message());
      return;
    }
    case RollingAction::kApply:
    case RollingAction::kRestart: {
      // The files first, then the record, then the restart: a quorate killed in between starts etcd
      // on the record, which never names files not yet written.
      Status s = WriteMaterial(d.phase);
      if (s.ok()) s = SaveLocal({id, d.phase});
      if (!s.ok()) {
        spdlog::warn("CA rotation: phase {} not taken: {}", plan_.PhaseName(d.phase), s.message());
        return;
      }
      if (d.action == RollingAction::kRestart) {
        spdlog::info("CA rotation: restarting etcd for phase {}", plan_.PhaseName(d.phase));
        restart_etcd_();
      } else {
        spdlog::info("CA rotation: the leaves of the new CA are in place for etcd's next handshakes");
      }
      return;
    }
  }
}

}  // namespace quorate
