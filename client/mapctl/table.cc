#include "client/mapctl/table.h"

#include <algorithm>
#include <cstdio>

namespace mapd::cli {

void Table::Print(std::ostream& os) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      out += cell;
      if (i + 1 < width.size()) out += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << "\n";
  };
  line(header_);
  for (const auto& r : rows_) line(r);
}

std::string HumanCount(int64_t n) {
  char buf[32];
  const double v = static_cast<double>(n);
  if (n >= 1000000000LL) std::snprintf(buf, sizeof(buf), "%.1fB", v / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof(buf), "%.1fM", v / 1e6);
  else if (n >= 1000) std::snprintf(buf, sizeof(buf), "%.1fK", v / 1e3);
  else std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(n));
  return buf;
}

}  // namespace mapd::cli
