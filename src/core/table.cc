#include "core/table.h"

#include <algorithm>

namespace quorate {

std::string RenderTable(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) width[i] = headers[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string rule = "+";
  for (size_t w : width) rule += std::string(w + 2, '-') + "+";
  rule += "\n";
  // As etcdctl's tablewriter: headers centred (the odd space on the right), cells right-aligned.
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out = "|";
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      size_t pad = width[i] - cell.size();
      size_t left = header ? pad / 2 : pad;
      out += " " + std::string(left, ' ') + cell + std::string(pad - left, ' ') + " |";
    }
    return out + "\n";
  };
  std::string out = rule + line(headers, true) + rule;
  for (const auto& row : rows) out += line(row, false);
  return out + rule;
}

}  // namespace quorate
