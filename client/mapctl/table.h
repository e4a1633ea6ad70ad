// Plain-text tables with aligned columns, for `-o table` output.
#ifndef MAPD_CLIENT_MAPCTL_TABLE_H_
#define MAPD_CLIENT_MAPCTL_TABLE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mapd::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void Print(std::ostream& os) const;
  // Each column's width as Print aligns it (the header's and the rows' widest cell), and one row
  // laid out with `widths` — for rows printed later under a table already printed (`jobs -w`).
  std::vector<size_t> Widths() const;
  static std::string Line(const std::vector<std::string>& cells, const std::vector<size_t>& widths);

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// 124439808 → "124.4M"; 68976648192 → "69.0B".
std::string HumanCount(int64_t n);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_TABLE_H_
