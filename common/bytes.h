// Byte sizes as people write and read them — one parser and one formatter for every flag, YAML
// field and message in MAP, so "64MB" means one thing everywhere.
#ifndef MAPD_COMMON_BYTES_H_
#define MAPD_COMMON_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace mapd {

// "80GiB", "40GB", "512MiB", "1.5TiB", "1000000" (bytes); units case-insensitive ("64mb" is 64
// MB). Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) of
// 1000, as Kubernetes' Mi and M — whose spellings are taken too: "80Gi", "512Mi", and the decimal
// "k", "M", "G", "T" exactly so (its "m" is milli, not mega). INVALID_ARGUMENT, naming the text,
// for anything not a positive size that fits in int64.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);

// "1.5 GiB", "320.0 MiB", "12 B": binary units, one decimal.
std::string FormatBytes(int64_t bytes);

}  // namespace mapd

#endif  // MAPD_COMMON_BYTES_H_
