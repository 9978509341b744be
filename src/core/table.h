// Box tables in the shape etcdctl's `-w table` prints.
#pragma once

#include <string>
#include <vector>

namespace quorate {

std::string RenderTable(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows);

}  // namespace quorate
