#include "quorate/status.h"

#include <cerrno>
#include <cstring>

namespace quorate {

Status Status::FromErrno(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(message);
    case EAGAIN:
    case ETIMEDOUT:
    case ECONNREFUSED:
      return Unavailable(message);
    default:
      return Internal(message);
  }
}

}  // namespace quorate
