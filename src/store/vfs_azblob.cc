#include "store/vfs_azblob.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pugixml.hpp>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <optional>
#include <sstream>

#include "net/cloud/azure_credentials.h"
#include "quorate/env.h"
#include "quorate/text.h"

namespace quorate {
namespace azblob {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string HeaderOf(const std::vector<std::pair<std::string, std::string>>& headers, const char* name) {
  for (const auto& [key, value] : headers) {
    if (strcasecmp(key.c_str(), name) == 0) return value;
  }
  return "";
}

}  // namespace

std::string StringToSign(const std::string& method, const std::string& target,
                         const std::vector<std::pair<std::string, std::string>>& headers, size_t body_bytes,
                         const std::string& account) {
  // Since version 2015-02-21 a Content-Length of 0 is signed as an empty line.
  std::string out = method + "\n";
  out += HeaderOf(headers, "Content-Encoding") + "\n" + HeaderOf(headers, "Content-Language") + "\n";
  out += (body_bytes ? std::to_string(body_bytes) : "") + "\n";
  for (const char* name : {"Content-MD5", "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
                           "If-Unmodified-Since", "Range"}) {
    out += HeaderOf(headers, name) + "\n";
  }
  std::map<std::string, std::string> ms;
  for (const auto& [name, value] : headers) {
    if (Lower(name).rfind("x-ms-", 0) == 0) ms[Lower(name)] = value;
  }
  for (const auto& [name, value] : ms) out += name + ":" + value + "\n";
  const size_t q = target.find('?');
  out += "/" + account + target.substr(0, q);
  std::map<std::string, std::vector<std::string>> params;
  if (q != std::string::npos) {
    std::stringstream query(target.substr(q + 1));
    for (std::string pair; std::getline(query, pair, '&');) {
      const size_t eq = pair.find('=');
      params[Lower(PercentDecode(pair.substr(0, eq)))].push_back(
          eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1)));
    }
  }
  for (auto& [name, values] : params) {
    std::sort(values.begin(), values.end());
    std::string joined;
    for (const auto& v : values) joined += (joined.empty() ? "" : ",") + v;
    out += "\n" + name + ":" + joined;
  }
  return out;
}

std::string SharedKeyAuthorization(const std::string& account, const std::string& key, const std::string& to_sign) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(to_sign.data()),
       to_sign.size(), mac, &len);
  std::string b64(4 * ((len + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), mac, static_cast<int>(len));
  return "SharedKey " + account + ":" + b64;
}

}  // namespace azblob

namespace {

// Put Block List takes at most 50,000 blocks.
constexpr size_t kMaxBlocks = 50000;
// What a token for the Blob service is for, in every Azure cloud.
constexpr char kStorageResource[] = "https://storage.azure.com/";
// An account key is 64 bytes (88 in base64); a key far longer is not one.
constexpr size_t kMaxKeyBase64Bytes = 1024;

std::string Base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(bytes.data()),
                  static_cast<int>(bytes.size()));
  return out;
}

// nullopt for text that is not base64.
std::optional<std::string> DecodeBase64(const std::string& text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > kMaxKeyBase64Bytes ||
      text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != std::string::npos) {
    return std::nullopt;
  }
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = text.size() - text.find_last_not_of('=') - 1;
  out.resize(static_cast<size_t>(n) - std::min<size_t>(pad, 2));
  return out;
}

// RFC 1123, as x-ms-date wants it: "Sun, 11 Oct 2009 21:49:13 GMT".
std::string HttpDate(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc;
  gmtime_r(&secs, &utc);
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  return fmt::format("{}, {:02} {} {} {:02}:{:02}:{:02} GMT", kDays[utc.tm_wday], utc.tm_mday, kMonths[utc.tm_mon],
                     utc.tm_year + 1900, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

// The Blob service's <Error><Code/><Message/></Error>; the code also comes as x-ms-error-code, which a
// HEAD or a proxy's page lacks.
struct BlobError {
  std::string code;
  std::string message;
};
BlobError ParseBlobError(const ObjectAnswer& answer) {
  BlobError out{answer.Header("x-ms-error-code"), ""};
  pugi::xml_document doc;
  if (doc.load_buffer(answer.body.data(), answer.body.size(), pugi::parse_default & ~pugi::parse_doctype)) {
    pugi::xml_node error = doc.child("Error");
    if (out.code.empty()) out.code = error.child("Code").text().get();
    out.message = error.child("Message").text().get();
  }
  return out;
}

// Block blobs: each part a block with an ID of one length, then the list of them commits the blob.
// Blocks never committed are not part of any blob, are not listed, and are discarded by the service
// a week later or when the blob is next written: an abandoned upload needs nothing from us.
class BlockUpload : public PartUpload {
 public:
  BlockUpload(ObjectStore& store, ObjectCall blob) : store_(store), blob_(std::move(blob)) {}

  Status Part(std::string bytes) override {
    if (ids_.size() >= kMaxBlocks) {
      return Status::FailedPrecondition(fmt::format("{}: more than {} blocks of {} bytes; Azure takes no more",
                                                    blob_.what, kMaxBlocks, ObjectStore::kPartBytes));
    }
    std::string id = Base64(fmt::format("quorate-block-{:06}", ids_.size()));
    ObjectCall put = blob_;
    put.query = {{"comp", "block"}, {"blockid", id}};
    put.headers = {{"Content-Type", "application/octet-stream"}};
    put.body = std::move(bytes);
    auto r = store_.Send(put, store_.PartDeadline(), ObjectStore::kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status != 201) return store_.Refused(put, *r);
    ids_.push_back(std::move(id));
    return Status::Ok();
  }

  Status Finish(std::string last) override {
    if (!last.empty()) {
      if (Status s = Part(std::move(last)); !s.ok()) return s;
    }
    std::string list = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
    for (const auto& id : ids_) list += "<Latest>" + id + "</Latest>";
    list += "</BlockList>";
    ObjectCall commit = blob_;
    commit.query = {{"comp", "blocklist"}};
    commit.headers = {{"Content-Type", "application/xml"}, {"x-ms-blob-content-type", "application/octet-stream"}};
    commit.body = std::move(list);
    auto r = store_.Send(commit, store_.PartDeadline(), ObjectStore::kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status != 201) return store_.Refused(commit, *r);
    return Status::Ok();
  }

  void Abort() override {}

 private:
  ObjectStore& store_;
  ObjectCall blob_;
  std::vector<std::string> ids_;
};

class AzblobVfs : public ObjectStore {
 public:
  struct Auth {
    std::string key;  // the account key, decoded; empty: a bearer token
    BearerTokenSource token;
  };
  AzblobVfs(Settings settings, std::string account, std::string container, bool account_in_host, Auth auth)
      : ObjectStore(std::move(settings)),
        account_(std::move(account)),
        container_(std::move(container)),
        account_in_host_(account_in_host),
        auth_(std::move(auth)) {}

  Status Refused(const ObjectCall& call, const ObjectAnswer& answer) const override {
    const BlobError error = ParseBlobError(answer);
    std::string text = fmt::format("{} {} at {}: HTTP {}", call.method, call.what, settings().endpoint.Text(),
                                   answer.status);
    if (!error.code.empty()) text += " " + Printable(error.code, 64);
    if (!error.message.empty()) text += ": " + Printable(error.message.substr(0, error.message.find('\n')), 200);
    if (answer.status == 401 || answer.status == 403) {
      return Status::InvalidArgument(
          text + (auth_.key.empty()
                      ? "; the token was rejected or lacks a role: give a current token for https://storage.azure.com/ "
                        "of an identity with Storage Blob Data Contributor on the container"
                      : fmt::format("; credentials rejected: check that AZURE_STORAGE_KEY is a key of account '{}'",
                                    account_)));
    }
    if (error.code == "ContainerNotFound") {
      return Status::InvalidArgument(text + fmt::format("; container '{}' does not exist in account '{}': create it "
                                                        "or fix the container in the URL",
                                                        container_, account_));
    }
    return Status::InvalidArgument(text);
  }

  bool ObjectMissing(const ObjectAnswer& answer) const override {
    return ParseBlobError(answer).code != "ContainerNotFound";
  }

 protected:
  ObjectCall ListCall(const std::string& full_prefix, const std::string& page_token) const override {
    ObjectCall call{"GET", ContainerPath(), {{"restype", "container"}, {"comp", "list"}, {"prefix", full_prefix}},
                    {}, "", UrlOf(full_prefix)};
    if (settings().page_size) call.query.emplace_back("maxresults", std::to_string(settings().page_size));
    if (!page_token.empty()) call.query.emplace_back("marker", page_token);
    return call;
  }

  Result<ObjectListPage> ParseListPage(const std::string& body) const override {
    pugi::xml_document doc;
    pugi::xml_node root;
    // No DOCTYPE, so no entity defined by the answer; character references are decoded as XML says.
    if (doc.load_buffer(body.data(), body.size(), pugi::parse_default & ~pugi::parse_doctype)) {
      root = doc.child("EnumerationResults");
    }
    if (!root) {
      return Status::DataLoss(fmt::format("the listing is not the Blob service's EnumerationResults XML; it starts "
                                          "'{}'",
                                          Printable(body.substr(0, 80), 80)));
    }
    ObjectListPage page;
    for (pugi::xml_node blob : root.child("Blobs").children("Blob")) {
      pugi::xml_node name = blob.child("Name");
      if (!name) return Status::DataLoss("the listing has a <Blob> without a <Name>");
      page.names.push_back(name.text().get());
    }
    page.next_token = root.child("NextMarker").text().get();
    return page;
  }

  ObjectCall GetCall(const std::string& full_key) const override {
    return {"GET", BlobPath(full_key), {}, {}, "", UrlOf(full_key)};
  }

  ObjectCall PutCall(const std::string& full_key, std::string body, bool only_if_absent) const override {
    ObjectCall call{"PUT",
                    BlobPath(full_key),
                    {},
                    {{"Content-Type", "application/octet-stream"}, {"x-ms-blob-type", "BlockBlob"}},
                    std::move(body),
                    UrlOf(full_key)};
    if (only_if_absent) call.headers.emplace_back("If-None-Match", "*");
    return call;
  }

  ObjectCall DeleteCall(const std::string& full_key) const override {
    return {"DELETE", BlobPath(full_key), {}, {}, "", UrlOf(full_key)};
  }

  // Put Blob with If-None-Match: * over an existing blob: 409 BlobAlreadyExists, and 412 from some
  // service versions and emulators.
  bool AlreadyThere(const ObjectAnswer& answer) const override {
    return answer.status == 412 || (answer.status == 409 && ParseBlobError(answer).code == "BlobAlreadyExists");
  }

  Status Authorize(HttpRequest& request, Clock::TimePoint deadline) override {
    request.headers.emplace_back("x-ms-version", kAzureBlobVersion);
    request.headers.emplace_back("x-ms-date", HttpDate(std::chrono::system_clock::now()));
    if (auth_.key.empty()) {
      auto token = auth_.token.token(deadline);
      if (!token.ok()) return token.status();
      request.headers.emplace_back("Authorization", "Bearer " + *token);
      return Status::Ok();
    }
    const std::string to_sign =
        azblob::StringToSign(request.method, request.target, request.headers, request.body.size(), account_);
    request.headers.emplace_back("Authorization", azblob::SharedKeyAuthorization(account_, auth_.key, to_sign));
    return Status::Ok();
  }

  bool RenewCredentials() override {
    if (!auth_.token.drop) return false;
    auth_.token.drop();
    return true;
  }

  Result<std::unique_ptr<PartUpload>> StartParts(const std::string& full_key) override {
    return std::unique_ptr<PartUpload>(
        new BlockUpload(*this, ObjectCall{"PUT", BlobPath(full_key), {}, {}, "", UrlOf(full_key)}));
  }

 private:
  std::string ContainerPath() const { return (account_in_host_ ? "" : "/" + account_) + "/" + container_; }
  std::string BlobPath(const std::string& full_key) const {
    return ContainerPath() + "/" + PercentEncode(full_key, true);
  }

  std::string account_, container_;
  bool account_in_host_;
  Auth auth_;
};

bool IsAccountName(const std::string& name) {
  return name.size() >= 3 && name.size() <= 24 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos;
}

// 3-63 of a-z, 0-9 and '-', starting with a letter or digit, no "--", not ending with '-'.
bool IsContainerName(const std::string& name) {
  return name.size() >= 3 && name.size() <= 63 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos && name.front() != '-' &&
         name.back() != '-' && name.find("--") == std::string::npos;
}

}  // namespace

Result<std::unique_ptr<Vfs>> OpenAzblobVfs(const std::string& url, Clock::TimePoint deadline,
                                           BearerTokenSource token) {
  auto parts = SplitStoreUrl(url, "azblob", {"endpoint", "environment", "timeout", "page_size"});
  if (!parts.ok()) return parts.status();
  const std::string& account = parts->first;
  if (!IsAccountName(account)) {
    return parts->Bad(fmt::format("account '{}' is not a storage account name: 3-24 of a-z and 0-9; want "
                                  "azblob://account/container/prefix",
                                  Printable(account, 80)));
  }
  const size_t slash = parts->rest.find('/');
  const std::string container = parts->rest.substr(0, slash);
  if (!IsContainerName(container)) {
    return parts->Bad(fmt::format("container '{}' is not a container name: 3-63 of a-z, 0-9 and '-', starting "
                                  "and ending with a letter or digit, no '--'; want azblob://account/container/prefix",
                                  Printable(container, 80)));
  }
  ObjectStore::Settings s;
  s.url = fmt::format("azblob://{}/{}", account, container);
  s.root = slash == std::string::npos ? "" : parts->rest.substr(slash + 1);
  s.deadline = deadline;
  if (!s.root.empty()) {
    if (Status v = ValidateKey(s.root); !v.ok()) return parts->Bad("prefix: " + v.message());
  }
  const std::string environment = parts->params.count("environment") ? parts->params.at("environment") : "public";
  const cloud::AzureCloud* azure_cloud = cloud::AzureCloudNamed(environment);
  if (!azure_cloud) {
    return parts->Bad(fmt::format("environment={}: want public, usgovernment or china", Printable(environment, 40)));
  }
  auto endpoint = ParseStoreEndpoint(parts->params.count("endpoint")
                                         ? parts->params.at("endpoint")
                                         : fmt::format("https://{}.blob.{}", account, azure_cloud->storage_suffix));
  if (!endpoint.ok()) return parts->Bad(endpoint.status().message());
  s.endpoint = *endpoint;
  if (Status c = ObjectStore::TakeCommonParams(*parts, 5000, s); !c.ok()) return c;

  AzblobVfs::Auth auth;
  if (const std::string key = Env("AZURE_STORAGE_KEY"); !key.empty()) {
    auto decoded = DecodeBase64(key);
    // Never the key in a message, not even a part of it.
    if (!decoded || decoded->empty()) {
      return parts->Bad(fmt::format("AZURE_STORAGE_KEY ({} bytes) is not base64; set it to a key of account '{}' "
                                    "as the portal or `az storage account keys list` shows it",
                                    key.size(), account));
    }
    auth.key = std::move(*decoded);
  } else if (token) {
    auth.token = std::move(token);
  } else {
    auto from_env = EnvBearerToken("AZURE_STORAGE_ACCESS_TOKEN");
    if (!from_env.ok()) return parts->Bad(from_env.status().message());
    if (*from_env) {
      auth.token = std::move(**from_env);
    } else {
      // Azure's chain: a client secret, workload identity, else the VM's managed identity, at the
      // environment's identity platform unless AZURE_AUTHORITY_HOST says otherwise.
      cloud::AzureSettings settings;
      if (Env("AZURE_AUTHORITY_HOST").empty()) settings.authority_host = azure_cloud->authority_host;
      auto azure = cloud::AzureTokenSource::Create(settings, kStorageResource);
      if (!azure.ok()) return parts->Bad(azure.status().message());
      auth.token = {[azure = *azure](Clock::TimePoint deadline) { return azure->Token(deadline); },
                    [azure = *azure] { azure->Drop(); }};
    }
  }
  const bool account_in_host = s.endpoint.host.rfind(account + ".", 0) == 0;
  return std::unique_ptr<Vfs>(new AzblobVfs(std::move(s), account, container, account_in_host, std::move(auth)));
}

}  // namespace quorate
