#include "quorate/provider.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/text.h"

namespace quorate {

Result<DiscoverySpec> ParseDiscoverySpec(std::string_view text) {
  DiscoverySpec spec;
  spec.text = std::string(text);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("--discovery '{}': {}", Printable(text, 128), why));
  };
  bool provider_given = false;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    size_t eq = text.find('=', i);
    size_t space = text.find(' ', i);
    if (eq == std::string_view::npos || (space != std::string_view::npos && space < eq)) {
      return bad(fmt::format("'{}' is not key=value", text.substr(i, space - i)));
    }
    std::string key(text.substr(i, eq - i));
    if (key.empty()) return bad("empty key");
    i = eq + 1;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      size_t close = text.find('"', i + 1);
      if (close == std::string_view::npos) return bad(fmt::format("unclosed quote after {}=", key));
      value = std::string(text.substr(i + 1, close - i - 1));
      i = close + 1;
      if (i < text.size() && text[i] != ' ') return bad(fmt::format("text after the quoted {}", key));
    } else {
      size_t end = text.find(' ', i);
      if (end == std::string_view::npos) end = text.size();
      value = std::string(text.substr(i, end - i));
      i = end;
    }
    if (key == "provider") {
      // One spec names one provider: a second one would be silently dropped.
      if (provider_given) return bad("key 'provider' given twice");
      provider_given = true;
      spec.provider = value;
    } else if (!spec.params.emplace(key, value).second) {
      return bad(fmt::format("key '{}' given twice", key));
    }
  }
  if (spec.provider.empty()) return bad("no provider=NAME");
  return spec;
}

std::optional<std::string> ProviderParams::Take(const std::string& key) {
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return std::nullopt;
  taken_[key] = true;
  return it->second;
}

Result<std::string> ProviderParams::TakeRequired(const std::string& key) {
  auto value = Take(key);
  if (!value || value->empty()) {
    return Status::InvalidArgument(
        fmt::format("--discovery: provider '{}' needs {}=...", spec_.provider, key));
  }
  return *value;
}

Result<int> ProviderParams::TakeNumber(const std::string& key, int fallback, int lo, int hi, const char* what) {
  auto text = Take(key);
  if (!text) return fallback;
  int n = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || end != text->data() + text->size() || n < lo || n > hi) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not {} ({}-{})", Label(key), Printable(*text, 32), what, lo, hi));
  }
  return n;
}

std::string ProviderParams::Label(const std::string& key) const {
  auto it = spec_.labels.find(key);
  return it != spec_.labels.end() ? it->second : "--discovery " + key;
}

Status ProviderParams::CheckAllTaken(const std::vector<std::string>& known) const {
  for (const auto& [key, value] : spec_.params) {
    if (!taken_.count(key)) {
      return Status::InvalidArgument(fmt::format("--discovery: provider '{}' has no key '{}' (known: {})",
                                                 spec_.provider, key, fmt::join(known, ", ")));
    }
  }
  return Status::Ok();
}

ProviderRegistry& ProviderRegistry::Get() {
  static ProviderRegistry registry;
  return registry;
}

void ProviderRegistry::Register(const std::string& name, ProviderFactory factory) {
  if (!factories_.emplace(name, std::move(factory)).second) {
    std::fprintf(stderr, "quorate: discovery provider '%s' registered twice\n", name.c_str());
    std::abort();
  }
}

const ProviderContext& ProviderParams::EmptyContext() {
  static const ProviderContext kEmpty;
  return kEmpty;
}

Result<std::unique_ptr<DiscoveryProvider>> ProviderRegistry::Create(const DiscoverySpec& spec) const {
  return Create(spec, ProviderContext{});
}

Result<std::unique_ptr<DiscoveryProvider>> ProviderRegistry::Create(const DiscoverySpec& spec,
                                                                    const ProviderContext& context) const {
  auto it = factories_.find(spec.provider);
  if (it == factories_.end()) {
    return Status::InvalidArgument(fmt::format("--discovery: unknown provider '{}' (known: {})",
                                               spec.provider, fmt::join(Names(), ", ")));
  }
  ProviderParams params(spec, context);
  return it->second(params);
}

std::vector<std::string> ProviderRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

std::string DefaultClientUrl(const PeerUrl& peer) {
  bool v6 = peer.host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:2379", peer.scheme, v6 ? "[" : "", peer.host, v6 ? "]" : "");
}

}  // namespace quorate
