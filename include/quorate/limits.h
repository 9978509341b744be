// Sizes quorate holds to wherever they come from: a flag, a provider's key or a cloud's answer.
#pragma once

namespace quorate {

inline constexpr int kMaxClusterSize = 99;

}  // namespace quorate
