// The fake membership with keys kept: what quorate stores in etcd (the rolling changes' intents and
// records) lives there, beside the members.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "testing/fake_etcd.h"

namespace quorate {

class FakeKeyedEtcdClient : public FakeEtcdClient {
 public:
  Status Put(const std::string& key, const std::string& value) override {
    keys[key] = value;
    return Status::Ok();
  }
  Result<std::optional<std::string>> Get(const std::string& key) override {
    auto it = keys.find(key);
    return it == keys.end() ? std::optional<std::string>() : std::optional(it->second);
  }
  Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override {
    std::vector<KeyValue> out;
    for (const auto& [k, v] : keys) {
      if (k.rfind(prefix, 0) == 0) out.push_back({k, v, 1});
    }
    return out;
  }
  std::map<std::string, std::string> keys;
};

}  // namespace quorate
