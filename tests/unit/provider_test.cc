// Provider keys as tables (include/quorate/provider.h): what a provider reads comes from its rows, a
// key no row names is refused, --help-provider prints the rows, and the documents that name the keys
// (DESIGN §2's table, the deploy READMEs' Keys sections, the README's discovery forms) name exactly
// those.
#include <doctest/doctest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli/cli.h"
#include "quorate/provider.h"

namespace quorate {
namespace {

// The source tree: this file's path, relative to the build directory (the test binary's parent's
// parent) when the compiler was given a relative one.
std::filesystem::path SourceRoot() {
  std::filesystem::path file = __FILE__;
  if (file.is_relative()) {
    char exe[PATH_MAX] = {};
    REQUIRE(readlink("/proc/self/exe", exe, sizeof exe - 1) > 0);
    file = std::filesystem::path(exe).parent_path().parent_path() / file;
  }
  return file.parent_path().parent_path().parent_path();
}

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text of `doc` from the line starting with `heading` to the next heading of that level.
std::string Section(const std::string& doc, const std::string& heading) {
  const size_t start = doc.find("\n" + heading);
  REQUIRE_MESSAGE(start != std::string::npos, heading);
  const std::string level = heading.substr(0, heading.find(' ') + 1);
  const size_t end = doc.find("\n" + level, start + 1);
  return doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::set<std::string> Backticked(const std::string& text) {
  std::set<std::string> words;
  // `key` or `key=VALUE`, as prose names a key.
  static const std::regex kWord("`([a-z][a-z0-9_]*)(=[^`]*)?`");
  for (std::sregex_iterator it(text.begin(), text.end(), kWord), end; it != end; ++it) words.insert((*it)[1]);
  return words;
}

std::set<std::string> TableNames(const std::string& provider) {
  const ProviderKeys* keys = ProviderRegistry::Get().Keys(provider);
  REQUIRE_MESSAGE(keys != nullptr, provider);
  std::set<std::string> names;
  for (const ProviderKey& key : *keys) names.insert(key.name);
  return names;
}

const std::vector<std::string> kProviders = {"static", "dns-srv", "file", "s3", "etcd", "k8s", "aws", "gce", "azure"};

int Cli(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return RunCli(static_cast<int>(argv.size()), argv.data(), "test");
}

TEST_CASE("provider keys: every provider has a table, its rows sound (a default within range, one of the choices)") {
  for (const std::string& provider : kProviders) {
    CAPTURE(provider);
    const ProviderKeys* keys = ProviderRegistry::Get().Keys(provider);
    REQUIRE(keys != nullptr);
    std::set<std::string> names;
    for (const ProviderKey& key : *keys) {
      CAPTURE(key.name);
      CHECK(names.insert(key.name).second);
      CHECK(!key.help.empty());
      CHECK_FALSE((key.required && !key.fallback.empty()));
      if (key.hi > 0 && !key.fallback.empty()) {
        const int fallback = std::stoi(key.fallback);
        CHECK(fallback >= key.lo);
        CHECK(fallback <= key.hi);
      }
      if (!key.choices.empty() && !key.fallback.empty()) {
        CHECK(std::find(key.choices.begin(), key.choices.end(), key.fallback) != key.choices.end());
      }
    }
  }
}

TEST_CASE("provider keys: a key no row names is refused, listing the table's; the defaults are the rows'") {
  auto spec = ParseDiscoverySpec("provider=aws asg=etcd region=eu-west-1 colour=blue");
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec);
  REQUIRE_FALSE(provider.ok());
  CHECK(provider.status().IsInvalidArgument());
  CHECK(provider.status().message().find("has no key 'colour'") != std::string::npos);
  CHECK(provider.status().message().find("asg, tag_key") != std::string::npos);
  CHECK(provider.status().message().find("peer_port, client_port") != std::string::npos);

  auto given = ParseDiscoverySpec("provider=gce mig=m mig_zone=z peer_port=70000");
  REQUIRE(given.ok());
  ProviderParams params(*given);
  auto port = params.TakeNumber("peer_port");
  REQUIRE_FALSE(port.ok());
  CHECK(port.status().message() == "--discovery peer_port '70000' is not a port (1-65535)");
  CHECK(*params.TakeNumber("client_port") == 2379);
  CHECK(*params.TakeValue("addr_type") == "private_v4");
  CHECK(*params.TakeValue("endpoint") == "https://compute.googleapis.com");

  auto choice = ParseDiscoverySpec("provider=azure environment=mars");
  REQUIRE(choice.ok());
  ProviderParams azure(*choice);
  CHECK(azure.TakeValue("environment").status().message() ==
        "--discovery environment 'mars' is not one of public, usgovernment, china");
}

TEST_CASE("provider keys: a key the code reads that its table does not declare is the code's fault, not the user's") {
  auto spec = ParseDiscoverySpec("provider=static members=n1=http://10.0.0.1:2380");
  REQUIRE(spec.ok());
  ProviderParams params(*spec);
  CHECK(params.TakeRequired("members").ok());
  CHECK_FALSE(params.Take("size").has_value());
  Status s = params.CheckAllTaken();
  CHECK(s.code() == Status::Code::kInternal);
  CHECK(s.message() == "provider 'static' reads keys its table does not declare: size");
}

TEST_CASE("provider keys: --help-provider prints a provider's table, and with no name the providers") {
  auto help = ProviderRegistry::Get().Help("aws");
  REQUIRE(help.ok());
  CHECK(help->starts_with("--discovery 'provider=aws key=value ...' takes these keys:\n"));
  CHECK(help->find("\n  KEY ") != std::string::npos);
  for (const std::string& key : TableNames("aws")) {
    CAPTURE(key);
    CHECK(help->find("\n  " + key + " ") != std::string::npos);
  }
  CHECK(help->find("private_v4|public_v4|public_v6|private_dns") != std::string::npos);
  CHECK(help->find("1-65535") != std::string::npos);
  auto unknown = ProviderRegistry::Get().Help("awz");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().IsInvalidArgument());
  CHECK(unknown.status().message().find("unknown provider 'awz' (known: ") != std::string::npos);

  CHECK(Cli({"quorate", "discover", "--help-provider", "gce"}) == 0);
  CHECK(Cli({"quorate", "discover", "--help-provider"}) == 0);
  CHECK(Cli({"quorate", "discover", "--help-provider", "nope"}) == 2);
}

TEST_CASE("provider keys: DESIGN §2 names exactly the keys of every provider's table") {
  const std::string design = Section(Read(SourceRoot() / "docs" / "DESIGN.md"), "## 2.");
  for (const std::string& provider : kProviders) {
    CAPTURE(provider);
    const std::string row_start = "\n| `" + provider + "` | ";
    const size_t at = design.find(row_start);
    REQUIRE(at != std::string::npos);
    const size_t keys_start = at + row_start.size();
    const std::string keys = design.substr(keys_start, design.find(" | ", keys_start) - keys_start);
    CHECK(Backticked(keys) == TableNames(provider));
  }
}

TEST_CASE("provider keys: the deploy READMEs' Keys sections name every key of their cloud's table") {
  for (const std::string provider : {"aws", "gce", "azure"}) {
    CAPTURE(provider);
    const std::set<std::string> named =
        Backticked(Section(Read(SourceRoot() / "deploy" / provider / "README.md"), "## Keys"));
    for (const std::string& key : TableNames(provider)) {
      CAPTURE(key);
      CHECK(named.count(key) == 1);
    }
  }
}

TEST_CASE("provider keys: the README's discovery forms use only keys their provider's table names") {
  const std::string readme = Read(SourceRoot() / "README.md");
  static const std::regex kForm("--discovery '(provider=[^']*)'");
  int forms = 0;
  for (std::sregex_iterator it(readme.begin(), readme.end(), kForm), end; it != end; ++it) {
    auto spec = ParseDiscoverySpec((*it)[1].str());
    REQUIRE(spec.ok());
    CAPTURE(spec->text);
    const std::set<std::string> names = TableNames(spec->provider);
    for (const auto& given : spec->params) {
      const std::string& key = given.first;
      CAPTURE(key);
      CHECK(names.count(key) == 1);
    }
    ++forms;
  }
  CHECK(forms >= 9);
}

// A provider that answers, but lists nobody.
class NobodyProvider : public DiscoveryProvider {
 public:
  Result<std::vector<Member>> Discover() override { return std::vector<Member>(); }
  std::string Describe() const override { return "the test's empty registry"; }
};
const RegisterProvider kNobody("test-nobody", {}, [](ProviderParams& params) -> Result<std::unique_ptr<DiscoveryProvider>> {
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  return std::unique_ptr<DiscoveryProvider>(new NobodyProvider());
});

TEST_CASE("quorate discover: a provider that finds no member is a runtime failure (exit 1), not bad input") {
  CHECK(Cli({"quorate", "discover", "--discovery", "provider=test-nobody", "--timeout", "1s"}) == 1);
  // A spec's own fault stays bad input.
  CHECK(Cli({"quorate", "discover", "--discovery", "provider=test-nobody colour=blue"}) == 2);
}

}  // namespace
}  // namespace quorate
