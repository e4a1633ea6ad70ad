#include "client/mapctl/table.h"

#include <algorithm>
#include <cstdio>

namespace mapd::cli {

std::vector<size_t> Table::Widths() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  return width;
}

std::string Table::Line(const std::vector<std::string>& cells, const std::vector<size_t>& width) {
  std::string out;
  for (size_t i = 0; i < width.size(); ++i) {
    const std::string cell = i < cells.size() ? cells[i] : "";
    out += cell;
    // A later row's wider cell pushes the rest right rather than being cut.
    if (i + 1 < width.size()) out += std::string(width[i] > cell.size() ? width[i] - cell.size() + 2 : 2, ' ');
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void Table::Print(std::ostream& os) const {
  const std::vector<size_t> width = Widths();
  os << Line(header_, width) << "\n";
  for (const auto& r : rows_) os << Line(r, width) << "\n";
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
