// Status propagation helpers used across MAP (absl has no public ASSIGN_OR_RETURN).
#ifndef MAPD_COMMON_STATUS_MACROS_H_
#define MAPD_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MAPD_STATUS_CONCAT_INNER_(a, b) a##b
#define MAPD_STATUS_CONCAT_(a, b) MAPD_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (an absl::Status) is not OK.
#define MAPD_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    const ::absl::Status _mapd_status = (expr);     \
    if (!_mapd_status.ok()) return _mapd_status;    \
  } while (0)

// `lhs = value of expr` where expr is an absl::StatusOr<T>; returns its status on error.
#define MAPD_ASSIGN_OR_RETURN(lhs, expr) \
  MAPD_ASSIGN_OR_RETURN_IMPL_(MAPD_STATUS_CONCAT_(_mapd_statusor_, __LINE__), lhs, expr)
#define MAPD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // MAPD_COMMON_STATUS_MACROS_H_
