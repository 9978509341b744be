#include "quorate/text.h"

#include <fmt/format.h>

namespace quorate {
namespace {

constexpr size_t kMaxNameBytes = 253;

// The length of the UTF-8 sequence starting at text[i], or 0 when the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

// C0 controls, DEL, and the C1 controls U+0080..U+009F (encoded as C2 80..C2 9F), which some
// terminals obey as escape sequences.
bool IsControlAt(std::string_view text, size_t i, size_t len) {
  auto c = static_cast<unsigned char>(text[i]);
  if (len == 1) return c < 0x20 || c == 0x7f;
  return len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t len = Utf8SequenceLength(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

bool IsPrintable(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t len = Utf8SequenceLength(text, i);
    if (len == 0 || IsControlAt(text, i, len)) return false;
    i += len;
  }
  return true;
}

Status CheckMemberName(std::string_view name, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("{} '{}' {}", what, Printable(name, 64), why));
  };
  if (name.size() > kMaxNameBytes) return bad(fmt::format("is longer than {} bytes", kMaxNameBytes));
  for (size_t i = 0; i < name.size();) {
    size_t len = Utf8SequenceLength(name, i);
    if (len == 0) return bad("is not UTF-8");
    if (IsControlAt(name, i, len)) return bad("holds a control character");
    if (name[i] == '=' || name[i] == ',') {
      return bad("holds '=' or ',', which separate the entries of --initial-cluster");
    }
    i += len;
  }
  return Status::Ok();
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  for (; i < text.size() && i < max_bytes;) {
    size_t len = Utf8SequenceLength(text, i);
    if (len == 0 || IsControlAt(text, i, len)) {
      size_t n = len == 0 ? 1 : len;
      for (size_t k = 0; k < n; ++k) {
        auto c = static_cast<unsigned char>(text[i + k]);
        switch (c) {
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          default:
            out += fmt::format("\\x{:02x}", c);
        }
      }
      i += n;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  if (i < text.size()) out += fmt::format("...({} more bytes)", text.size() - i);
  return out;
}

}  // namespace quorate
