// Batch norm over groups of the batch (docs/runtime.md "Batch norm per rank"): the statistics of
// every training batch norm taken over `groups` equal runs of consecutive samples instead of the
// whole batch — what PyTorch DDP computes with plain BatchNorm layers, each rank normalising its
// own samples. With the batch split in whole groups (data parallelism over `groups` ranks: one
// group a rank) no rank needs another's statistics, and the forward and backward all-reduce of
// each batch norm's sums (synchronised batch norm, the default) are gone. The graph stays one
// computation: one process running it normalises the same groups, so the reference check and the
// equivalence tests still compare ranks with one process. The running statistics still move by
// the whole batch's (the groups' sums added).
#ifndef MAPD_MODEL_GRAPH_BATCH_NORM_GROUPS_H_
#define MAPD_MODEL_GRAPH_BATCH_NORM_GROUPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// `graph` with every batch_norm_stats over `groups` groups of its batch (its `group_size`
// attribute; the stats values [groups, 2, C]) and every batch_norm_apply reading them counting
// one group's values; not yet verified (MakeVerifiedGraph). groups = 1 returns the graph as it
// is; INVALID_ARGUMENT naming the node where `groups` does not divide a batch norm's batch, or
// for groups < 1 or a graph already grouped.
absl::StatusOr<v1::Graph> GroupBatchNorms(v1::Graph graph, int64_t groups);

}  // namespace mapd

#endif  // MAPD_MODEL_GRAPH_BATCH_NORM_GROUPS_H_
