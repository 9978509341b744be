// The options table: one row per option binds its key (the flag name without dashes, also the YAML
// key), its environment variable, help, default, and the binder that parses, validates and stores a
// value into Config (etcd's AddFlags is the model). A command declares the keys it takes;
// ResolveConfig walks them with the precedence flag > environment > YAML --config file > default.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "quorate/status.h"

namespace quorate {

// A value and where it came from ("--timeout", "QUORATE_TIMEOUT", "--config f.yaml: timeout (line
// 3)"), so an error points at what the operator typed.
struct Sourced {
  std::string value;
  std::string source;
};

// Parses and validates one value and stores it: InvalidArgument naming `v.source` and the value
// (escaped and cut). An empty value leaves Config as it is, but for the kinds that refuse one.
using Binder = std::function<Status(const Sourced& v, Config& config)>;

struct OptionDef {
  const char* key;
  const char* env;  // full variable name, or nullptr for none
  const char* help;
  const char* default_value;  // nullptr: none
  Binder bind;
  bool is_bool;  // may be given as a bare flag (--client-cert-auth means true)
  bool is_list;  // a YAML list is accepted, as the comma-separated value the flag would carry
};
const std::vector<OptionDef>& AllOptions();
const OptionDef* FindOption(const std::string& key);

// The raw strings given on the command line, keyed by option key.
using FlagValues = std::map<std::string, std::string>;

// Resolves every option of `keys` from flags > environment > YAML file > default, binds each, then
// fills the defaults that derive from others (name, data dir, state dir) and checks the options that
// go together. `env` is injectable so tests do not depend on the process environment.
Result<Config> ResolveConfig(const std::vector<std::string>& keys, const FlagValues& flags,
                             const std::map<std::string, std::string>& env);
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace quorate
