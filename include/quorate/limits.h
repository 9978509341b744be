// The limits quorate holds every cluster to, whoever states its size: the operator (--cluster-size)
// or a platform (a scaling group's desired size).
#pragma once

namespace quorate {

inline constexpr int kMaxClusterSize = 99;

}  // namespace quorate
