#include "planner/lower/lowering.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/plan/prepared_graph.h"

namespace mapd {

std::vector<int64_t> RankCoords(const std::vector<int64_t>& mesh, int rank) {
  std::vector<int64_t> coords(mesh.size());
  int64_t r = rank;
  for (int a = static_cast<int>(mesh.size()) - 1; a >= 0; --a) {
    coords[a] = r % mesh[a];
    r /= mesh[a];
  }
  return coords;
}

absl::StatusOr<std::vector<int64_t>> BlockStart(const Shape& shape, const Placement& placement,
                                                const std::vector<int64_t>& mesh, const std::vector<int64_t>& coords) {
  auto local = LocalShape(shape, placement, mesh);
  if (!local.ok()) return local.status();
  std::vector<int64_t> start(shape.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t index = 0;  // mixed radix over the axes splitting d, the first axis outermost
    for (size_t a = 0; a < placement.size(); ++a) {
      if (placement[a].kind == AxisPlacement::Kind::kShard && placement[a].dim == static_cast<int>(d)) {
        index = index * mesh[a] + coords[a];
      }
    }
    start[d] = index * (*local)[d];
  }
  return start;
}

namespace {

using Kind = AxisPlacement::Kind;

v1::TensorType ToProto(const TensorType& t) {
  v1::TensorType p;
  p.set_dtype(t.dtype);
  for (int64_t d : t.shape) p.add_shape(d);
  return p;
}

// Does any dimension lie split by two or more axes?
bool MultiAxisSplit(const Placement& p) {
  std::map<int, int> axes_per_dim;
  for (const auto& a : p) {
    if (a.kind == Kind::kShard && ++axes_per_dim[a.dim] > 1) return true;
  }
  return false;
}

class Lowerer {
 public:
  Lowerer(const Graph& graph, const std::vector<int64_t>& mesh, const std::vector<Strategy>& strategies, int rank,
          const std::map<std::string, Placement>& held_inputs)
      : graph_(graph), mesh_(mesh), strategies_(strategies), held_inputs_(held_inputs), coords_(RankCoords(mesh, rank)) {
    program_.set_rank(rank);
    for (int64_t d : mesh) program_.add_mesh(d);
    for (int64_t c : coords_) program_.add_coords(c);
  }

  absl::StatusOr<v1::RankProgram> Run() {
    auto prepared = PrepareNodes(graph_);
    if (!prepared.ok()) return prepared.status();
    for (int n = 0; n < graph_.num_nodes(); ++n) {
      for (size_t o = 0; o < (*prepared)[n]->out.size(); ++o) {
        needs_grad_[graph_.node(n).outputs(o)] = (*prepared)[n]->out_rg[o];
      }
    }
    for (const auto& p : graph_.proto().parameters()) needs_grad_[p.name()] = p.trainable();
    if (auto st = PlaceLeaves(); !st.ok()) return st;
    for (int n = 0; n < graph_.num_nodes(); ++n) {
      if (auto st = LowerNode(n, *(*prepared)[n]); !st.ok()) return st;
    }
    if (graph_.proto().outputs_size() > 0) {
      const std::string& loss = graph_.proto().outputs(0);
      auto it = available_.find(loss);
      if (it == available_.end() || it->second.empty()) {
        return absl::InternalError(absl::StrCat("the loss '", loss, "' was not computed"));
      }
      program_.set_loss(it->second.front().second);
      const Placement& p = it->second.front().first;
      for (size_t a = 0; a < p.size(); ++a) {
        if (p[a].kind == Kind::kPartial) program_.add_loss_partial_axes(static_cast<int>(a));
      }
    }
    for (const std::string& out : graph_.proto().outputs()) {
      const auto& [placement, local] = available_.at(out).front();
      if (auto st = Describe(out, placement, local, program_.add_outputs()); !st.ok()) return st;
    }
    return program_;
  }

 private:
  // Parameters and graph inputs start in the placement their first consumer wants (R if none).
  absl::Status PlaceLeaves() {
    std::unordered_map<std::string, Placement> first;
    for (int n = 0; n < graph_.num_nodes(); ++n) {
      const v1::Node& node = graph_.node(n);
      for (int i = 0; i < node.inputs_size(); ++i) {
        if (node.inputs(i).empty()) continue;
        first.emplace(node.inputs(i), strategies_[n].inputs[i]);
      }
    }
    auto place = [&](const std::string& name, v1::Shard* shard) -> absl::Status {
      auto it = first.find(name);
      const Placement p = it == first.end() ? Replicated(static_cast<int>(mesh_.size())) : it->second;
      // A leaf is never Partial: hold it replicated and let the consumer's re-layout make it so.
      Placement held = p;
      for (auto& a : held) {
        if (a.kind == Kind::kPartial) a = AxisPlacement::R();
      }
      // Unless it is given (an activation another stage sends, as that stage holds it).
      if (auto given = held_inputs_.find(name); given != held_inputs_.end()) held = given->second;
      if (held.size() != mesh_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("input '", name, "' held ", PlacementToString(held), " on a ", mesh_.size(), "-axis mesh"));
      }
      available_[name].push_back({held, name});
      return Describe(name, held, name, shard);
    };
    for (const auto& p : graph_.proto().parameters()) {
      if (auto st = place(p.name(), program_.add_parameters()); !st.ok()) return st;
    }
    for (const auto& in : graph_.proto().inputs()) {
      if (auto st = place(in.name(), program_.add_inputs()); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  // The shard of `value` held at `held` under the local name `local`.
  absl::Status Describe(const std::string& value, const Placement& held, const std::string& local_name, v1::Shard* shard) {
    const TensorType& t = graph_.TypeOf(value);
    auto local = LocalShape(t.shape, held, mesh_);
    if (!local.ok()) return local.status();
    auto start = BlockStart(t.shape, held, mesh_, coords_);
    if (!start.ok()) return start.status();
    shard->set_name(local_name);
    shard->set_placement(PlacementToString(held));
    *shard->mutable_local_type() = ToProto(TensorType{t.dtype, *local});
    for (int64_t s : *start) shard->mutable_offsets()->add_start(s);
    return absl::OkStatus();
  }

  absl::StatusOr<TensorType> LocalType(const std::string& value, const Placement& p) {
    const TensorType& t = graph_.TypeOf(value);
    auto local = LocalShape(t.shape, p, mesh_);
    if (!local.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("value '", value, "' ", t.ToString(), " cannot be placed ",
                                                        PlacementToString(p), ": ", local.status().message()));
    }
    return TensorType{t.dtype, *local};
  }

  // One Communicate step on `axis`, from the value named `in` at `from` to `to`.
  absl::StatusOr<std::string> Step(const std::string& value, const std::string& in, const Placement& to, int axis,
                                   v1::Communicate::Kind kind, int dim, int to_dim) {
    auto type = LocalType(value, to);
    if (!type.ok()) return type.status();
    std::string out = absl::StrCat(value, "@", PlacementToString(to));
    if (names_.count(out)) out = absl::StrCat(out, "#", names_.size());
    names_.insert(out);
    v1::Communicate* c = program_.add_instructions()->mutable_communicate();
    c->set_kind(kind);
    c->set_axis(axis);
    c->set_dim(dim);
    c->set_to_dim(to_dim);
    c->set_input(in);
    c->set_output(out);
    *c->mutable_output_type() = ToProto(*type);
    return out;
  }

  // The step that changes axis `a` of `cur` to `want[a]`.
  absl::StatusOr<std::string> AxisStep(const std::string& value, const std::string& in, Placement& cur,
                                       const Placement& want, int a) {
    const AxisPlacement f = cur[a], t = want[a];
    Placement next = cur;
    next[a] = t;
    v1::Communicate::Kind kind = v1::Communicate::KIND_UNSPECIFIED;
    int dim = -1, to_dim = -1;
    if (f.kind == Kind::kPartial && t.kind == Kind::kReplicate) kind = v1::Communicate::ALL_REDUCE;
    else if (f.kind == Kind::kPartial && t.kind == Kind::kShard) kind = v1::Communicate::REDUCE_SCATTER, dim = t.dim;
    else if (f.kind == Kind::kShard && t.kind == Kind::kReplicate) kind = v1::Communicate::ALL_GATHER, dim = f.dim;
    else if (f.kind == Kind::kShard && t.kind == Kind::kShard) kind = v1::Communicate::ALL_TO_ALL, dim = f.dim, to_dim = t.dim;
    else if (f.kind == Kind::kReplicate && t.kind == Kind::kShard) kind = v1::Communicate::SLICE, dim = t.dim;
    else if (f.kind == Kind::kReplicate && t.kind == Kind::kPartial) kind = v1::Communicate::KEEP_ON_FIRST;
    else if (f.kind == Kind::kShard && t.kind == Kind::kPartial) kind = v1::Communicate::SCATTER_TO_PARTIAL, dim = f.dim;
    auto out = Step(value, in, next, a, kind, dim, to_dim);
    if (out.ok()) cur = next;
    return out;
  }

  // The local name of `value` at placement `want`, emitting the re-layout if needed.
  absl::StatusOr<std::string> Ensure(const std::string& value, const Placement& want) {
    auto& have = available_[value];
    if (have.empty()) return absl::InternalError(absl::StrCat("value '", value, "' used before it is computed"));
    for (const auto& [p, name] : have) {
      if (p == want) return name;
    }
    Placement cur = have.front().first;
    std::string name = have.front().second;
    // Axis by axis unless some state on the way splits one dimension by two axes.
    bool simple = !MultiAxisSplit(cur) && !MultiAxisSplit(want);
    for (size_t a = 0; a < cur.size() && simple; ++a) {
      Placement probe = cur;
      for (size_t b = 0; b <= a; ++b) probe[b] = want[b];
      simple = !MultiAxisSplit(probe);
    }
    const int axes = static_cast<int>(cur.size());
    if (simple) {
      for (int a = 0; a < axes; ++a) {
        if (cur[a] == want[a]) continue;
        auto out = AxisStep(value, name, cur, want, a);
        if (!out.ok()) return out.status();
        name = *out;
      }
    } else {
      const Placement replicated = Replicated(axes);
      for (int a = axes - 1; a >= 0; --a) {  // gather, innermost axis first
        if (cur[a].kind != Kind::kShard) continue;
        auto out = AxisStep(value, name, cur, replicated, a);
        if (!out.ok()) return out.status();
        name = *out;
      }
      for (int a = 0; a < axes; ++a) {  // sum partials
        if (cur[a].kind != Kind::kPartial) continue;
        auto out = AxisStep(value, name, cur, replicated, a);
        if (!out.ok()) return out.status();
        name = *out;
      }
      for (int a = 0; a < axes; ++a) {  // slice outermost first, then partials
        if (want[a].kind != Kind::kShard) continue;
        auto out = AxisStep(value, name, cur, want, a);
        if (!out.ok()) return out.status();
        name = *out;
      }
      for (int a = 0; a < axes; ++a) {
        if (want[a].kind != Kind::kPartial) continue;
        auto out = AxisStep(value, name, cur, want, a);
        if (!out.ok()) return out.status();
        name = *out;
      }
    }
    have.push_back({want, name});
    return name;
  }

  absl::Status LowerNode(int n, const PreparedNode& pn) {
    const v1::Node& node = graph_.node(n);
    const Strategy& s = strategies_[n];
    const int axes = static_cast<int>(mesh_.size());
    if (s.inputs.size() != static_cast<size_t>(node.inputs_size()) || s.outputs.size() != static_cast<size_t>(node.outputs_size())) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': the strategy has ", s.inputs.size(),
                                                     " input and ", s.outputs.size(), " output placements for ",
                                                     node.inputs_size(), " inputs and ", node.outputs_size(), " outputs"));
    }
    v1::Compute compute;
    compute.set_node(n);
    for (int i = 0; i < node.inputs_size(); ++i) {
      const std::string& in = node.inputs(i);
      if (in.empty()) {
        compute.add_inputs("");
        continue;
      }
      if (static_cast<int>(s.inputs[i].size()) != axes) {
        return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' input ", i, ": placement ",
                                                       PlacementToString(s.inputs[i]), " is not one entry per mesh axis"));
      }
      auto name = Ensure(in, s.inputs[i]);
      if (!name.ok()) return name.status();
      // A replicated input on an axis whose work this node splits: its gradient is partial there.
      std::string local = *name;
      if (needs_grad_[in]) {
        for (int a = 0; a < axes; ++a) {
          if (s.axis_label[a] == 0 || s.inputs[i][a].kind != Kind::kReplicate) continue;
          const std::string key = absl::StrCat(local, "!sync", a);
          auto it = synced_.find(key);
          if (it == synced_.end()) {
            auto out = Step(in, local, s.inputs[i], a, v1::Communicate::GRAD_SYNC, -1, -1);
            if (!out.ok()) return out.status();
            it = synced_.emplace(key, *out).first;
          }
          local = it->second;
        }
      }
      compute.add_inputs(local);
    }
    // Outputs: local types and blocks; view targets made local.
    double scale = 1;
    if (pn.def->sharding) {
      auto rule = pn.def->sharding(pn.ctx());
      if (!rule.ok()) return rule.status();
      for (int a = 0; a < axes; ++a) {
        if (s.axis_label[a] != 0 && rule->IsAveraged(s.axis_label[a])) scale /= static_cast<double>(mesh_[a]);
      }
    }
    compute.set_output_scale(scale);
    *compute.mutable_attrs() = node.attrs();
    for (int o = 0; o < node.outputs_size(); ++o) {
      const std::string& out = node.outputs(o);
      auto type = LocalType(out, s.outputs[o]);
      if (!type.ok()) return type.status();
      auto start = BlockStart(graph_.TypeOf(out).shape, s.outputs[o], mesh_, coords_);
      if (!start.ok()) return start.status();
      *compute.add_output_types() = ToProto(*type);
      v1::Offsets* offsets = compute.add_output_offsets();
      for (int64_t x : *start) offsets->add_start(x);
      compute.add_outputs(out);
      names_.insert(out);
      available_[out].push_back({s.outputs[o], out});
      if (pn.def->traits.view && node.attrs().count("shape")) {
        v1::AttrValue shape;
        for (int64_t d : type->shape) shape.mutable_ints()->add_values(d);
        (*compute.mutable_attrs())["shape"] = shape;
      }
    }
    *program_.add_instructions()->mutable_compute() = std::move(compute);
    return absl::OkStatus();
  }

  const Graph& graph_;
  const std::vector<int64_t>& mesh_;
  const std::vector<Strategy>& strategies_;
  const std::map<std::string, Placement>& held_inputs_;
  std::vector<int64_t> coords_;
  v1::RankProgram program_;
  std::unordered_map<std::string, std::vector<std::pair<Placement, std::string>>> available_;
  std::unordered_map<std::string, bool> needs_grad_;
  std::unordered_map<std::string, std::string> synced_;
  std::set<std::string> names_;
};

}  // namespace

absl::StatusOr<v1::RankProgram> LowerForRank(const Graph& graph, const std::vector<int64_t>& mesh,
                                             const std::vector<Strategy>& strategies, int rank, int zero_stage) {
  LowerOptions options;
  options.zero_stage = zero_stage;
  return LowerForRank(graph, mesh, strategies, rank, options);
}

absl::StatusOr<v1::RankProgram> LowerForRank(const Graph& graph, const std::vector<int64_t>& mesh,
                                             const std::vector<Strategy>& strategies, int rank, const LowerOptions& options) {
  const int zero_stage = options.zero_stage;
  if (zero_stage < 0 || zero_stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("ZeRO stage ", zero_stage, " does not exist; use 0, 1, 2 or 3"));
  }
  int64_t devices = 1;
  for (int64_t d : mesh) {
    if (d < 1) return absl::InvalidArgumentError(absl::StrCat("mesh axis of size ", d));
    devices *= d;
  }
  if (mesh.empty()) return absl::InvalidArgumentError("the mesh has no axes");
  if (rank < 0 || rank >= devices) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside a mesh of ", devices, " devices"));
  }
  if (static_cast<int>(strategies.size()) != graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(strategies.size(), " strategies for ", graph.num_nodes(), " nodes"));
  }
  for (const auto& [name, placement] : options.held_inputs) {
    if (graph.FindValue(name) == nullptr) return absl::InvalidArgumentError(absl::StrCat("held input '", name, "' is not in the graph"));
  }
  auto program = Lowerer(graph, mesh, strategies, rank, options.held_inputs).Run();
  if (program.ok()) program->set_zero_stage(zero_stage);
  return program;
}

std::vector<std::string> InstructionReads(const v1::Instruction& ins) {
  if (ins.has_communicate()) return {ins.communicate().input()};
  std::vector<std::string> out;
  for (const std::string& name : ins.compute().inputs()) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::vector<std::string> InstructionWrites(const v1::Instruction& ins) {
  if (ins.has_communicate()) return {ins.communicate().output()};
  return {ins.compute().outputs().begin(), ins.compute().outputs().end()};
}

absl::StatusOr<std::vector<Strategy>> StrategiesFromPlan(const v1::Plan& plan, const Graph& graph) {
  if (plan.nodes_size() != graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan has ", plan.nodes_size(), " node strategies for a graph of ",
                                                   graph.num_nodes(), " nodes"));
  }
  const int axes = plan.mesh_size();
  std::vector<Strategy> out;
  for (int n = 0; n < plan.nodes_size(); ++n) {
    const v1::NodeStrategy& ns = plan.nodes(n);
    if (ns.node() != graph.node(n).name()) {
      return absl::InvalidArgumentError(absl::StrCat("plan node ", n, " is '", ns.node(), "' but the graph's is '",
                                                     graph.node(n).name(), "'"));
    }
    Strategy s;
    s.axis_label.assign(axes, 0);
    for (int a = 0; a < axes && a < static_cast<int>(ns.axis_labels().size()); ++a) {
      if (ns.axis_labels()[a] != '.') s.axis_label[a] = ns.axis_labels()[a];
    }
    auto parse = [&](const std::string& text) -> absl::StatusOr<Placement> {
      if (text.empty()) return Placement();
      auto p = ParsePlacement(text);
      if (!p.ok()) return p.status();
      if (static_cast<int>(p->size()) != axes) {
        return absl::InvalidArgumentError(absl::StrCat("node '", ns.node(), "': placement ", text, " for a ", axes, "-axis mesh"));
      }
      return p;
    };
    for (const auto& t : ns.input_placements()) {
      auto p = parse(t);
      if (!p.ok()) return p.status();
      s.inputs.push_back(*p);
    }
    for (const auto& t : ns.output_placements()) {
      auto p = parse(t);
      if (!p.ok()) return p.status();
      s.outputs.push_back(*p);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace mapd
