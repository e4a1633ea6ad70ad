// The cost graphs one search builds, memoised: per micro-batch count the graph of one
// micro-batch (micro_batch.h) with its prepared nodes and batch labels, and per (mesh, ZeRO
// stage, micro-batch count, micro-batches in flight) its cost graph (cost_graph.h). Another ZeRO
// stage of a cost graph built already shares its strategies and edges (AtZeroStage).
//
// One cache serves every search of one graph: the planner's own, and the pipeline search's many
// searches of one stage graph (on other submeshes, at other depths, MAP's and the baselines').
#ifndef MAPD_PLANNER_PLAN_COST_GRAPH_CACHE_H_
#define MAPD_PLANNER_PLAN_COST_GRAPH_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "planner/plan/batch_dims.h"
#include "planner/plan/cost_graph.h"
#include "planner/plan/folded_bound.h"
#include "planner/plan/micro_batch.h"
#include "planner/plan/prepared_graph.h"
#include "planner/profile/profile_options.h"
#include "planner/sharding/cluster.h"

namespace mapd {

// Cost-graph memos (cost_graph.h) per (mesh, micro-batch count), for the caches of several
// graphs of alike nodes planned on one cluster with one set of options.
class CostGraphMemos {
 public:
  CostGraphMemo* For(const std::vector<int64_t>& mesh, int64_t m) { return &memos_[{mesh, m}]; }
  // The memo of (mesh, m) if one was made (nullptr otherwise).
  CostGraphMemo* Find(const std::vector<int64_t>& mesh, int64_t m) {
    auto it = memos_.find({mesh, m});
    return it == memos_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::pair<std::vector<int64_t>, int64_t>, CostGraphMemo> memos_;
};

class CostGraphCache {
 public:
  // `cluster` gives the device type, budget and links (its mesh is replaced per request);
  // `profile` the optimizer and precision. The graph must outlive the cache; so must `memos`
  // (optional: shared with other graphs' caches of the same cluster and options).
  CostGraphCache(const Graph& graph, const ClusterOptions& cluster, const ProfileOptions& profile,
                 CostGraphMemos* memos = nullptr)
      : graph_(graph), cluster_(cluster), profile_(profile), memos_(memos) {}

  const Graph& graph() const { return graph_; }

  // The micro-batches a pipeline stage keeps at once is min(depth, m) (CostGraphOptions::
  // activations_in_flight); Get uses the depth set here (1: not a pipeline stage).
  void set_pipeline_depth(int64_t depth) { depth_ = depth; }

  absl::StatusOr<const Cluster*> ClusterFor(const std::vector<int64_t>& mesh);

  // Whether and how the graph splits into micro-batches (AnalyzeMicroBatching), once.
  absl::StatusOr<const MicroBatching*> Analysis();

  // The graph of one of `m` micro-batches (the graph itself for 1).
  absl::StatusOr<const Graph*> GraphFor(int64_t m);

  // The micro-batch graph's prepared nodes and batch labels (for the baselines' families).
  struct Facts {
    std::vector<std::unique_ptr<PreparedNode>> prepared;
    BatchInfo batch;
    std::shared_ptr<const std::vector<std::string>> layer_keys;
    std::shared_ptr<const LayerIndex> layer_index;
  };
  absl::StatusOr<const Facts*> FactsFor(int64_t m);

  absl::StatusOr<const CostGraph*> Get(const std::vector<int64_t>& mesh, int stage, int64_t m = 1);

  // Whether Get(mesh, stage, m) has its cost graph already.
  bool Built(const std::vector<int64_t>& mesh, int stage, int64_t m) const { return graphs_.count(KeyOf(mesh, stage, m)) > 0; }
  // BuildRestrictedCostGraph of (mesh, ZeRO stage, m), not kept (a baseline's family).
  absl::StatusOr<CostGraph> BuildRestricted(const std::vector<int64_t>& mesh, int stage, int64_t m, const StrategyFilter& allow);

  // The micro-batch graph's folded skeleton (folded_bound.h), once per count.
  absl::StatusOr<const FoldSkeleton*> SkeletonFor(int64_t m);
  // Its kinds costed on `mesh` (at the depth set here) — what a bound needs without building
  // the cost graph — at every ZeRO stage, or with `only_stage` ≥ 0 at that one. Read from the
  // kinds the cost graphs of this mesh and count memoise, and not kept: most pairs a search
  // bounds it never builds.
  absl::StatusOr<SkeletonCosts> KindCosts(const std::vector<int64_t>& mesh, int64_t m, int only_stage = -1);

  double build_seconds() const { return build_seconds_; }
  size_t built() const { return graphs_.size(); }

 private:
  const Graph& graph_;
  const ClusterOptions cluster_;
  const ProfileOptions profile_;
  CostGraphMemos* const memos_;
  CostGraphMemos own_memos_;  // when no memos are shared
  CostGraphMemo* MemoFor(const std::vector<int64_t>& mesh, int64_t m) {
    return (memos_ != nullptr ? memos_ : &own_memos_)->For(mesh, m);
  }
  // What a cost graph or a bound of (mesh, m) is made from.
  struct Inputs {
    const Cluster* cluster = nullptr;
    const Graph* graph = nullptr;   // the micro-batch graph
    const Facts* facts = nullptr;
    ProfileOptions profile;         // with the cluster's device
    CostGraphOptions cost_options;  // micro-batches and in flight set; ZeRO stage 0
  };
  absl::StatusOr<Inputs> InputsFor(const std::vector<int64_t>& mesh, int64_t m);
  CostGraphMemo* MemoIfAny(const std::vector<int64_t>& mesh, int64_t m) {
    return (memos_ != nullptr ? memos_ : &own_memos_)->Find(mesh, m);
  }
  int64_t depth_ = 1;
  std::unique_ptr<MicroBatcher> batcher_;  // the graph analysed once (Analysis)
  std::map<std::vector<int64_t>, std::unique_ptr<Cluster>> clusters_;
  std::map<int64_t, std::unique_ptr<Graph>> micro_;
  std::map<int64_t, std::unique_ptr<Facts>> facts_;
  std::map<int64_t, std::unique_ptr<FoldSkeleton>> skeletons_;
  // (mesh, ZeRO stage, micro-batches, in flight)
  using GraphKey = std::tuple<std::vector<int64_t>, int, int64_t, int64_t>;
  GraphKey KeyOf(const std::vector<int64_t>& mesh, int stage, int64_t m) const { return {mesh, stage, m, std::min(depth_, m)}; }
  std::map<GraphKey, std::unique_ptr<CostGraph>> graphs_;
  double build_seconds_ = 0;
};

}  // namespace mapd

#endif  // MAPD_PLANNER_PLAN_COST_GRAPH_CACHE_H_
