#include "etcd/etcd_version.h"

#include <array>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/text.h"

namespace quorate {
namespace {

// etcd 3.6's migration of its --experimental-* value flags (server/embed/config.go,
// experimentalFlagMigrationMap): the new name is the old one without the prefix.
constexpr std::array kRenamedValueFlags = {
    "compact-hash-check-time",       "corrupt-check-time",
    "compaction-batch-limit",        "watch-progress-notify-interval",
    "warning-apply-duration",        "bootstrap-defrag-threshold-megabytes",
    "memory-mlock",                  "snapshot-catchup-entries",
    "compaction-sleep-interval",     "downgrade-check-time",
    "peer-skip-client-san-verification", "enable-distributed-tracing",
    "distributed-tracing-address",   "distributed-tracing-service-name",
    "distributed-tracing-instance-id", "distributed-tracing-sampling-rate",
};

// etcd 3.6's boolean --experimental-* flags that became feature gates
// (server/features/etcd_features.go).
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kGatedFlags = {{
    {"initial-corrupt-check", "InitialCorruptCheck"},
    {"compact-hash-check-enabled", "CompactHashCheck"},
    {"enable-lease-checkpoint", "LeaseCheckpoint"},
    {"enable-lease-checkpoint-persist", "LeaseCheckpointPersist"},
    {"stop-grpc-service-on-defrag", "StopGRPCServiceOnDefrag"},
    {"txn-mode-write-with-shared-buffer", "TxnModeWriteWithSharedBuffer"},
}};

constexpr std::string_view kExperimental = "experimental-";

bool IsRenamed(std::string_view name) {
  for (std::string_view n : kRenamedValueFlags) {
    if (n == name) return true;
  }
  return false;
}

std::string_view GateOf(std::string_view flag) {
  for (const auto& [f, gate] : kGatedFlags) {
    if (f == flag) return gate;
  }
  return {};
}

std::string_view FlagOfGate(std::string_view gate) {
  for (const auto& [flag, g] : kGatedFlags) {
    if (g == gate) return flag;
  }
  return {};
}

// Splits "a,b,c" into its parts, dropping empty ones.
std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    if (!part.empty()) parts.emplace_back(part);
    text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
  }
  return parts;
}

}  // namespace

EtcdFeatures FeaturesOf(const EtcdVersion& v) {
  EtcdFeatures f;
  bool relaxed = v >= EtcdVersion{3, 6, 11} || (v.major == 3 && v.minor == 5 && v.patch >= 30);
  f.member_add_needs_every_voter = !relaxed;
  return f;
}

std::vector<std::string> SpellEtcdArgs(const std::vector<std::string>& args, const EtcdVersion& version) {
  const bool gates = version >= EtcdVersion{3, 6, 0};
  std::vector<std::string> out;
  std::vector<std::string> gate_settings;  // "Name=true", one --feature-gates at the end
  for (const auto& arg : args) {
    std::string_view word = arg;
    // Only the --name[=value] form is respelt: a value given as the next word is not a flag.
    if (!word.starts_with("--") || word.size() <= 2) {
      out.push_back(arg);
      continue;
    }
    std::string_view body = word.substr(2);
    size_t eq = body.find('=');
    std::string_view name = body.substr(0, eq);
    std::string value = eq == std::string_view::npos ? "" : std::string(body.substr(eq));  // "=..." or ""
    bool experimental = name.starts_with(kExperimental);
    std::string_view bare = experimental ? name.substr(kExperimental.size()) : name;
    if (IsRenamed(bare)) {
      out.push_back(fmt::format("--{}{}{}", gates ? "" : kExperimental, bare, value));
    } else if (experimental && gates && !GateOf(bare).empty()) {
      gate_settings.push_back(fmt::format("{}={}", GateOf(bare), value.empty() ? "true" : value.substr(1)));
    } else if (name == "feature-gates" && !gates) {
      // Back to 3.5's flags, gate by gate; what has no 3.5 flag stays a gate, for etcd to refuse.
      std::vector<std::string> left;
      for (const auto& setting : SplitCommas(value.empty() ? "" : value.substr(1))) {
        std::string_view gate = std::string_view(setting).substr(0, setting.find('='));
        std::string_view flag = FlagOfGate(gate);
        if (flag.empty() || setting.find('=') == std::string::npos) {
          left.push_back(setting);
        } else {
          out.push_back(fmt::format("--{}{}{}", kExperimental, flag, setting.substr(setting.find('='))));
        }
      }
      if (!left.empty()) out.push_back(fmt::format("--feature-gates={}", fmt::join(left, ",")));
    } else if (name == "feature-gates" && gates) {
      for (auto& setting : SplitCommas(value.empty() ? "" : value.substr(1))) gate_settings.push_back(setting);
    } else {
      out.push_back(arg);
    }
  }
  if (!gate_settings.empty()) out.push_back(fmt::format("--feature-gates={}", fmt::join(gate_settings, ",")));
  return out;
}

Result<EtcdVersion> ParseEtcdVersionOutput(const std::string& output, const std::string& source) {
  constexpr std::string_view kPrefix = "etcd Version: ";
  for (size_t start = 0; start < output.size();) {
    size_t end = std::min(output.find('\n', start), output.size());
    std::string_view line = std::string_view(output).substr(start, end - start);
    if (line.starts_with(kPrefix)) {
      line.remove_prefix(kPrefix.size());
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      return ParseEtcdVersion(line, source + " --version");
    }
    start = end + 1;
  }
  return Status::InvalidArgument(
      fmt::format("{} --version printed no \"etcd Version:\" line: {}", source, Printable(output, 120)));
}

}  // namespace quorate
