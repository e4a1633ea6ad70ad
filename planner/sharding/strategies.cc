#include "planner/sharding/strategies.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace mapd {
namespace {

// The placement of a tensor labelled `labels` under the picks `axis_label`. `partial` says
// whether a picked linear_reduced label that the tensor lacks makes it Partial (outputs and
// addend inputs) rather than replicated.
Placement Place(const std::string& labels, const std::vector<char>& axis_label, const ShardingRule& rule,
                bool partial) {
  Placement p(axis_label.size(), AxisPlacement::R());
  for (size_t a = 0; a < axis_label.size(); ++a) {
    const char l = axis_label[a];
    if (l == 0) continue;
    const size_t pos = labels.find(l);
    if (pos != std::string::npos) {
      p[a] = AxisPlacement::S(static_cast<int>(pos));
    } else if (partial && rule.IsLinearReduced(l)) {
      p[a] = AxisPlacement::P();
    }
  }
  return p;
}

}  // namespace

std::string Strategy::ToString() const {
  std::vector<char> order;
  std::map<char, std::vector<int>> axes;
  for (size_t a = 0; a < axis_label.size(); ++a) {
    const char l = axis_label[a];
    if (l == 0) continue;
    if (!axes.count(l)) order.push_back(l);
    axes[l].push_back(static_cast<int>(a));
  }
  if (order.empty()) return "replicated";
  std::vector<std::string> parts;
  for (char l : order) parts.push_back(absl::StrCat(std::string(1, l), "@", absl::StrJoin(axes[l], ",")));
  return absl::StrJoin(parts, " ");
}

std::string Strategy::PlacementsString() const {
  auto join = [](const std::vector<Placement>& ps) {
    std::vector<std::string> s;
    for (const auto& p : ps) s.push_back(p.empty() ? "_" : PlacementToString(p));
    return absl::StrJoin(s, ",");
  };
  return absl::StrCat(join(inputs), "->", join(outputs));
}

absl::StatusOr<std::vector<Strategy>> StrategiesFromRule(const ShardingRule& rule, const CostContext& ctx,
                                                         const std::vector<int64_t>& mesh_shape) {
  if (mesh_shape.empty()) return absl::InvalidArgumentError("a device mesh needs at least one axis");
  for (int64_t n : mesh_shape) {
    if (n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh axis of size ", n, " in [", absl::StrJoin(mesh_shape, ","), "]: sizes must be >= 1"));
    }
  }
  MAPD_RETURN_IF_ERROR(ValidateShardingRule(rule, ctx));

  // Every dimension size each label names, and the labels in order of first appearance.
  std::map<char, std::vector<int64_t>> sizes;
  std::vector<char> order;
  auto collect = [&](const std::string& labels, const TensorType& t) {
    for (size_t d = 0; d < labels.size(); ++d) {
      if (!sizes.count(labels[d])) order.push_back(labels[d]);
      sizes[labels[d]].push_back(t.shape[d]);
    }
  };
  for (int i = 0; i < ctx.op.num_inputs(); ++i) {
    if (ctx.op.has_input(i)) collect(rule.inputs[i], ctx.op.input(i));
  }
  for (size_t o = 0; o < rule.outputs.size(); ++o) collect(rule.outputs[o], ctx.outputs[o]);
  auto divides = [&](char l, int64_t n) {
    for (int64_t s : sizes[l]) {
      if (s % n != 0) return false;
    }
    return true;
  };

  // Per axis: none, then every splittable label that divides by the axis alone (a necessary
  // condition; the product over the axes that pick it is checked per combination below).
  const size_t axes = mesh_shape.size();
  std::vector<std::vector<char>> choices(axes, std::vector<char>{0});
  for (size_t a = 0; a < axes; ++a) {
    if (mesh_shape[a] == 1) continue;
    for (char l : order) {
      if (!rule.IsUnsplittable(l) && divides(l, mesh_shape[a])) choices[a].push_back(l);
    }
  }

  std::vector<Strategy> out;
  std::vector<size_t> pick(axes, 0);
  while (true) {
    Strategy s;
    s.axis_label.resize(axes);
    std::map<char, int64_t> ways;  // label -> product of the sizes of the axes that split it
    for (size_t a = 0; a < axes; ++a) {
      s.axis_label[a] = choices[a][pick[a]];
      if (s.axis_label[a] != 0) {
        auto it = ways.emplace(s.axis_label[a], 1).first;
        it->second *= mesh_shape[a];
      }
    }
    bool ok = true;
    for (const auto& [l, n] : ways) ok = ok && divides(l, n);
    if (ok) {
      for (int i = 0; i < ctx.op.num_inputs(); ++i) {
        s.inputs.push_back(ctx.op.has_input(i) ? Place(rule.inputs[i], s.axis_label, rule, rule.IsAddend(i))
                                               : Placement());
      }
      for (const auto& labels : rule.outputs) s.outputs.push_back(Place(labels, s.axis_label, rule, true));
      out.push_back(std::move(s));
    }
    // Next combination: the last axis varies fastest.
    size_t a = axes;
    while (a > 0 && ++pick[a - 1] == choices[a - 1].size()) pick[--a] = 0;
    if (a == 0) break;
  }
  return out;
}

absl::StatusOr<std::vector<Strategy>> GenerateStrategies(const OpDef& def, const CostContext& ctx,
                                                         const std::vector<int64_t>& mesh_shape) {
  if (!def.sharding) {
    return absl::UnimplementedError(
        absl::StrCat("node '", ctx.op.node_name(), "': op '", def.name, "' has no sharding rule"));
  }
  MAPD_ASSIGN_OR_RETURN(ShardingRule rule, def.sharding(ctx));
  return StrategiesFromRule(rule, ctx, mesh_shape);
}

}  // namespace mapd
