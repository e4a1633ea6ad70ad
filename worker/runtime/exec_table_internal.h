// Private to the exec table's translation units (exec_table.cc, which builds the table, and the
// family files that add their ops to it): what they share. Includes LibTorch's tensor headers.
#ifndef MAPD_WORKER_RUNTIME_EXEC_TABLE_INTERNAL_H_
#define MAPD_WORKER_RUNTIME_EXEC_TABLE_INTERNAL_H_

#include <ATen/core/Tensor.h>

#include "worker/runtime/exec_table.h"

namespace mapd {
namespace exec_internal {

// Input i, or nullopt when the node lacks it (an absent optional input).
inline c10::optional<at::Tensor> Opt(const ExecContext& c, int i) {
  if (!c.has_input(i)) return c10::nullopt;
  return c.in(i);
}

// Adds layer_norm, rms_norm, batch_norm, batch_norm_stats, batch_norm_apply,
// batch_norm_running_stats, group_norm, softmax and log_softmax (exec_table_norm.cc).
void AddNormOps(ExecTable& t);

}  // namespace exec_internal
}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_EXEC_TABLE_INTERNAL_H_
