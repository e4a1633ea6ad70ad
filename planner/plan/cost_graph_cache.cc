#include "planner/plan/cost_graph_cache.h"

#include <algorithm>
#include <chrono>

#include "planner/plan/micro_batch.h"

namespace mapd {

absl::StatusOr<const Cluster*> CostGraphCache::ClusterFor(const std::vector<int64_t>& mesh) {
  auto it = clusters_.find(mesh);
  if (it != clusters_.end()) return it->second.get();
  ClusterOptions co = cluster_;
  co.mesh = mesh;
  co.devices = 0;
  auto c = MakeCluster(co);
  if (!c.ok()) return c.status();
  return (clusters_[mesh] = std::make_unique<Cluster>(*std::move(c))).get();
}

absl::StatusOr<const MicroBatching*> CostGraphCache::Analysis() {
  if (batcher_ == nullptr) {
    auto b = MicroBatcher::Create(graph_);
    if (!b.ok()) return b.status();
    batcher_ = std::make_unique<MicroBatcher>(*std::move(b));
  }
  return &batcher_->info();
}

absl::StatusOr<const Graph*> CostGraphCache::GraphFor(int64_t m) {
  if (m == 1) return &graph_;
  auto it = micro_.find(m);
  if (it != micro_.end()) return it->second.get();
  auto analysis = Analysis();
  if (!analysis.ok()) return analysis.status();
  auto g = batcher_->Make(m);
  if (!g.ok()) return g.status();
  return (micro_[m] = std::make_unique<Graph>(*std::move(g))).get();
}

absl::StatusOr<const CostGraphCache::Facts*> CostGraphCache::FactsFor(int64_t m) {
  auto it = facts_.find(m);
  if (it != facts_.end()) return it->second.get();
  auto graph = GraphFor(m);
  if (!graph.ok()) return graph.status();
  auto f = std::make_unique<Facts>();
  auto prepared = PrepareNodes(**graph);
  if (!prepared.ok()) return prepared.status();
  f->prepared = *std::move(prepared);
  auto batch = FindBatch(**graph, f->prepared);
  if (!batch.ok()) return batch.status();
  f->batch = *std::move(batch);
  f->layer_keys = LayerKeys(**graph);
  f->layer_index = std::make_shared<const LayerIndex>(IndexLayers(**graph));
  return (facts_[m] = std::move(f)).get();
}

absl::StatusOr<CostGraphCache::Inputs> CostGraphCache::InputsFor(const std::vector<int64_t>& mesh, int64_t m) {
  Inputs in;
  auto cluster = ClusterFor(mesh);
  if (!cluster.ok()) return cluster.status();
  auto graph = GraphFor(m);
  if (!graph.ok()) return graph.status();
  auto facts = FactsFor(m);
  if (!facts.ok()) return facts.status();
  in.cluster = *cluster;
  in.graph = *graph;
  in.facts = *facts;
  in.profile = profile_;
  in.profile.device = in.cluster->device;
  in.cost_options.micro_batches = m;
  in.cost_options.activations_in_flight = std::min(depth_, m);
  return in;
}

absl::StatusOr<const CostGraph*> CostGraphCache::Get(const std::vector<int64_t>& mesh, int stage, int64_t m) {
  const GraphKey key = KeyOf(mesh, stage, m);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return it->second.get();
  auto in = InputsFor(mesh, m);
  if (!in.ok()) return in.status();
  CostGraphOptions cgo = in->cost_options;
  cgo.zero_stage = stage;
  const auto start = std::chrono::steady_clock::now();
  // Another stage of a cost graph built already: its strategies and edges are the same.
  absl::StatusOr<CostGraph> cg = absl::NotFoundError("");
  for (int z = 0; z < 4 && !cg.ok(); ++z) {
    auto built = graphs_.find(KeyOf(mesh, z, m));
    if (built != graphs_.end()) cg = AtZeroStage(*built->second, stage);
  }
  if (!cg.ok()) {
    cg = BuildCostGraph(*in->graph, in->facts->prepared, *in->cluster, in->profile, cgo, in->facts->layer_keys, MemoFor(mesh, m));
  }
  if (!cg.ok()) return cg.status();
  cg->layer_index = in->facts->layer_index;
  build_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return (graphs_[key] = std::make_unique<CostGraph>(*std::move(cg))).get();
}

absl::StatusOr<CostGraph> CostGraphCache::BuildRestricted(const std::vector<int64_t>& mesh, int stage, int64_t m,
                                                          const StrategyFilter& allow) {
  auto in = InputsFor(mesh, m);
  if (!in.ok()) return in.status();
  CostGraphOptions cgo = in->cost_options;
  cgo.zero_stage = stage;
  const auto start = std::chrono::steady_clock::now();
  auto cg = BuildRestrictedCostGraph(*in->graph, in->facts->prepared, *in->cluster, in->profile, cgo, in->facts->layer_keys,
                                     MemoFor(mesh, m), allow);
  if (cg.ok()) cg->layer_index = in->facts->layer_index;
  build_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return cg;
}

absl::StatusOr<const FoldSkeleton*> CostGraphCache::SkeletonFor(int64_t m) {
  auto it = skeletons_.find(m);
  if (it != skeletons_.end()) return it->second.get();
  auto graph = GraphFor(m);
  if (!graph.ok()) return graph.status();
  auto facts = FactsFor(m);
  if (!facts.ok()) return facts.status();
  auto skeleton = std::make_unique<FoldSkeleton>(MakeFoldSkeleton(**graph, (*facts)->prepared, *(*facts)->layer_keys, *(*facts)->layer_index));
  return (skeletons_[m] = std::move(skeleton)).get();
}

absl::StatusOr<SkeletonCosts> CostGraphCache::KindCosts(const std::vector<int64_t>& mesh, int64_t m, int only_stage) {
  auto skeleton = SkeletonFor(m);
  if (!skeleton.ok()) return skeleton.status();
  auto in = InputsFor(mesh, m);
  if (!in.ok()) return in.status();
  const auto start = std::chrono::steady_clock::now();
  // A memo only read: a pair bounded and not searched leaves nothing behind.
  auto costs = CostSkeleton(*in->graph, in->facts->prepared, **skeleton, *in->cluster, in->profile, in->cost_options,
                            MemoIfAny(mesh, m), only_stage);
  build_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return costs;
}

}  // namespace mapd
