#include "planner/plan/micro_batch.h"

#include "absl/strings/str_cat.h"
#include "model/graph/verifier.h"
#include "planner/plan/batch_dims.h"
#include "planner/plan/prepared_graph.h"

namespace mapd {

std::vector<int64_t> MicroBatching::Counts() const {
  if (!possible()) return {1};
  std::vector<int64_t> out;
  for (int64_t m = 1; m <= batch; ++m) {
    if (batch % m == 0) out.push_back(m);
  }
  return out;
}

namespace {

struct Analysis {
  MicroBatching info;
  BatchInfo batch;
};

absl::StatusOr<Analysis> Analyze(const Graph& graph) {
  auto prepared = PrepareNodes(graph);
  if (!prepared.ok()) return prepared.status();
  Analysis a;
  auto batch = FindBatch(graph, *prepared);
  if (!batch.ok()) return batch.status();
  a.batch = *std::move(batch);
  a.info.batch = a.batch.batch;
  if (a.info.batch == 0) a.info.refusal = "the graph has no batched input";
  if (a.info.batch == 1) return a;  // one sample: one pass, nothing to refuse
  for (int n = 0; n < graph.num_nodes() && a.info.refusal.empty(); ++n) {
    const char label = a.batch.label[n];
    if (label == 0) continue;
    const PreparedNode& pn = *(*prepared)[n];
    auto rule = pn.def->sharding(pn.ctx());
    if (!rule.ok()) return rule.status();
    // batch_norm_stats sums over the batch linearly, but what it feeds normalises the whole batch
    // by those sums: each micro-batch would be normalised by its own.
    const bool normalises = graph.node(n).op() == "batch_norm" || graph.node(n).op() == "batch_norm_stats";
    if (rule->IsUnsplittable(label) || graph.node(n).op() == "batch_norm_stats") {
      a.info.refusal = absl::StrCat("node '", graph.node(n).name(), "' (", graph.node(n).op(),
                                    ") does not treat the samples of a batch independently (",
                                    normalises ? "it normalises over the batch" : "its batch dimension is unsplittable",
                                    "), so micro-batches would not equal one step on the whole batch");
    } else if (rule->IsLinearReduced(label) && !rule->IsAveraged(label)) {
      a.info.averaged = false;
    }
  }
  for (const auto& u : graph.proto().buffer_updates()) {
    if (a.info.refusal.empty() && a.batch.value_dim.count(u.value())) {
      a.info.refusal = absl::StrCat("buffer '", u.buffer(), "' is updated from the batch ('", u.value(), "')");
    }
  }
  return a;
}

}  // namespace

absl::StatusOr<MicroBatching> AnalyzeMicroBatching(const Graph& graph) {
  auto a = Analyze(graph);
  if (!a.ok()) return a.status();
  return a->info;
}

absl::StatusOr<Graph> MicroBatchGraph(const Graph& graph, int64_t micro_batches) {
  if (micro_batches == 1) return graph;
  auto batcher = MicroBatcher::Create(graph);
  if (!batcher.ok()) return batcher.status();
  return batcher->Make(micro_batches);
}

absl::StatusOr<MicroBatcher> MicroBatcher::Create(const Graph& graph) {
  auto a = Analyze(graph);
  if (!a.ok()) return a.status();
  MicroBatcher b;
  b.graph_ = &graph;
  b.info_ = std::move(a->info);
  b.batch_ = std::make_shared<const BatchInfo>(std::move(a->batch));
  return b;
}

absl::StatusOr<Graph> MicroBatcher::Make(int64_t micro_batches) const {
  const Graph& graph = *graph_;
  if (micro_batches == 1) return graph;
  struct {
    const MicroBatching& info;
    const BatchInfo& batch;
  } analysis{info_, *batch_};
  const auto* a = &analysis;
  if (micro_batches < 1 || (a->info.batch > 0 && a->info.batch % micro_batches != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(micro_batches, " micro-batches do not divide the global batch of ",
                                                   a->info.batch, "; give a divisor of it"));
  }
  if (!a->info.possible()) {
    return absl::FailedPreconditionError(absl::StrCat("'", graph.name(), "' cannot run in micro-batches: ", a->info.refusal));
  }
  const auto& dims = a->batch.value_dim;
  auto divide = [&](const std::string& value, v1::TensorType* t) -> absl::Status {
    auto it = dims.find(value);
    if (it == dims.end()) return absl::OkStatus();
    const int d = it->second;
    if (d >= t->shape_size() || t->shape(d) % micro_batches != 0) {
      return absl::FailedPreconditionError(absl::StrCat("'", value, "' of shape ", TensorType::FromProto(*t).ToString(),
                                                        " does not divide into ", micro_batches, " micro-batches on dimension ", d));
    }
    t->set_shape(d, t->shape(d) / micro_batches);
    return absl::OkStatus();
  };
  v1::Graph p = graph.proto();
  for (auto& in : *p.mutable_inputs()) {
    if (auto st = divide(in.name(), in.mutable_type()); !st.ok()) return st;
  }
  std::unordered_map<std::string, const v1::TensorType*> typed;
  for (auto& v : *p.mutable_values()) {
    if (auto st = divide(v.name(), v.mutable_type()); !st.ok()) return st;
    typed[v.name()] = &v.type();
  }
  // View targets and the shapes of batch-sized creations (zeros_like(x)): the divided output
  // shape (as the lowering makes them local).
  for (auto& node : *p.mutable_nodes()) {
    const OpDef* def = OpRegistry::Global().Find(node.op());
    if (def == nullptr || !(def->traits.view || def->traits.creation) || !node.attrs().count("shape") ||
        node.outputs_size() == 0) {
      continue;
    }
    if (!dims.count(node.outputs(0))) continue;
    auto t = typed.find(node.outputs(0));
    if (t == typed.end()) continue;
    v1::AttrValue shape;
    for (int64_t d : t->second->shape()) shape.mutable_ints()->add_values(d);
    (*node.mutable_attrs())["shape"] = shape;
  }
  auto out = MakeVerifiedGraph(std::move(p));
  if (!out.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", graph.name(), "' cannot run in ", micro_batches, " micro-batches: with the batch divided, ", out.status().message()));
  }
  return out;
}

}  // namespace mapd
