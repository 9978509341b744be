// Text that comes from outside (peers, agents, stores, DNS, APIs) is checked here before it is used,
// and escaped before it is shown: a name or URL that reaches etcd's config or a log line can then
// never carry a line break, an escape sequence or bytes that are not UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "quorate/status.h"

namespace quorate {

bool IsValidUtf8(std::string_view text);

// UTF-8 without control characters: safe to put into a file or a log line as it is.
bool IsPrintable(std::string_view text);

// A member name as etcd could carry it in --initial-cluster: UTF-8, no control characters, no '='
// or ',' (the separators of that flag), at most 253 bytes. Empty is allowed (an unstarted member
// has no name yet); `what` names the value in the error.
Status CheckMemberName(std::string_view name, std::string_view what);

// `text` as one printable line: control characters and bytes that are not UTF-8 as \n, \t, \xNN,
// and cut after `max_bytes` with the number of bytes left out. For logs and error messages.
std::string Printable(std::string_view text, size_t max_bytes = 256);

}  // namespace quorate
