#include "quorate/provider.h"

#include <algorithm>
#include <array>
#include <cassert>
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

std::string DescribeValues(const ProviderKey& key) {
  if (key.hi > 0) return fmt::format("{}-{}", key.lo, key.hi);
  if (!key.choices.empty()) return fmt::format("{}", fmt::join(key.choices, "|"));
  return key.values.empty() ? "text" : key.values;
}

ProviderParams::ProviderParams(const DiscoverySpec& spec, const ProviderContext& context)
    : spec_(spec), context_(context), keys_(ProviderRegistry::Get().Keys(spec.provider)) {}

const ProviderKey* ProviderParams::Row(const std::string& key) {
  if (keys_ == nullptr) return nullptr;
  for (const ProviderKey& row : *keys_) {
    if (row.name == key) return &row;
  }
  undeclared_.push_back(key);
  return nullptr;
}

std::optional<std::string> ProviderParams::Take(const std::string& key) {
  Row(key);
  auto it = spec_.params.find(key);
  if (it == spec_.params.end()) return std::nullopt;
  taken_[key] = true;
  return it->second;
}

Result<std::string> ProviderParams::TakeValue(const std::string& key) {
  const ProviderKey* row = Row(key);
  auto value = Take(key);
  if (row == nullptr) return value.value_or("");
  if (row->required && (!value || value->empty())) {
    return Status::InvalidArgument(fmt::format("--discovery: provider '{}' needs {}=...", spec_.provider, key));
  }
  if (!value) return row->fallback;
  if (!row->choices.empty() && std::find(row->choices.begin(), row->choices.end(), *value) == row->choices.end()) {
    return Status::InvalidArgument(fmt::format("{} '{}' is not one of {}", Label(key), Printable(*value, 40),
                                               fmt::join(row->choices, ", ")));
  }
  return *value;
}

Result<std::string> ProviderParams::TakeRequired(const std::string& key) {
  if (const ProviderKey* row = Row(key); row != nullptr) {
    assert(row->required && "TakeRequired of a key its table calls optional");
    return TakeValue(key);
  }
  auto value = Take(key);
  if (!value || value->empty()) {
    return Status::InvalidArgument(
        fmt::format("--discovery: provider '{}' needs {}=...", spec_.provider, key));
  }
  return *value;
}

Result<int> ProviderParams::TakeNumber(const std::string& key) {
  const ProviderKey* row = Row(key);
  assert(row != nullptr && row->hi > 0 && "TakeNumber of a key its table does not call a number");
  int fallback = 0;
  std::from_chars(row->fallback.data(), row->fallback.data() + row->fallback.size(), fallback);
  return TakeNumber(key, fallback, row->lo, row->hi, row->values.c_str());
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

Status ProviderParams::CheckAllTaken() const {
  assert(keys_ != nullptr && "CheckAllTaken() of a provider registered without a table");
  if (!undeclared_.empty()) {
    return Status::Internal(fmt::format("provider '{}' reads keys its table does not declare: {}", spec_.provider,
                                        fmt::join(undeclared_, ", ")));
  }
  std::vector<std::string> known;
  for (const ProviderKey& row : *keys_) known.push_back(row.name);
  return CheckAllTaken(known);
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

void ProviderRegistry::Register(const std::string& name, std::optional<ProviderKeys> keys, ProviderFactory factory) {
  if (!entries_.emplace(name, Entry{std::move(keys), std::move(factory)}).second) {
    std::fprintf(stderr, "quorate: discovery provider '%s' registered twice\n", name.c_str());
    std::abort();
  }
}

const ProviderContext& ProviderParams::EmptyContext() {
  static const ProviderContext kEmpty;
  return kEmpty;
}

Status ProviderRegistry::Unknown(const std::string& name) const {
  return Status::InvalidArgument(
      fmt::format("--discovery: unknown provider '{}' (known: {})", Printable(name, 64), fmt::join(Names(), ", ")));
}

Result<std::unique_ptr<DiscoveryProvider>> ProviderRegistry::Create(const DiscoverySpec& spec) const {
  return Create(spec, ProviderContext{});
}

Result<std::unique_ptr<DiscoveryProvider>> ProviderRegistry::Create(const DiscoverySpec& spec,
                                                                    const ProviderContext& context) const {
  auto it = entries_.find(spec.provider);
  if (it == entries_.end()) return Unknown(spec.provider);
  ProviderParams params(spec, context);
  return it->second.factory(params);
}

std::vector<std::string> ProviderRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const ProviderKeys* ProviderRegistry::Keys(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() || !it->second.keys ? nullptr : &*it->second.keys;
}

Result<std::string> ProviderRegistry::Help(const std::string& name) const {
  const ProviderKeys* keys = Keys(name);
  if (keys == nullptr) return Unknown(name);
  // Columns as wide as their widest cell, the meaning last since it is the longest.
  std::vector<std::array<std::string, 4>> rows = {{"KEY", "DEFAULT", "VALUES", "MEANING"}};
  for (const ProviderKey& key : *keys) {
    rows.push_back({key.name, key.required ? "(required)" : key.fallback.empty() ? "-" : key.fallback,
                    DescribeValues(key), key.help});
  }
  std::array<size_t, 3> width{};
  for (const auto& row : rows) {
    for (size_t i = 0; i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out = fmt::format("--discovery 'provider={} key=value ...' takes these keys:\n", name);
  for (const auto& row : rows) {
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", row[0], width[0], row[1], width[1], row[2], width[2], row[3]);
  }
  return out;
}

std::string DefaultClientUrl(const PeerUrl& peer) {
  bool v6 = peer.host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:2379", peer.scheme, v6 ? "[" : "", peer.host, v6 ? "]" : "");
}

}  // namespace quorate
