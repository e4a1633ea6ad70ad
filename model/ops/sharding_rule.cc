#include "model/ops/sharding_rule.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace mapd {
namespace {

// Labels in the order LabelPool hands them out. No ',', '-', '>', ';', '_', '@', '.' or space:
// those punctuate ShardingRule::ToString and Strategy::ToString.
constexpr char kAlphabet[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&*+/:<=?^~";

}  // namespace

bool ShardingRule::IsAddend(int input) const {
  return std::find(addends.begin(), addends.end(), input) != addends.end();
}

std::string ShardingRule::ToString() const {
  std::vector<std::string> ins;
  for (const auto& s : inputs) ins.push_back(s);
  std::string out = absl::StrCat(absl::StrJoin(ins, ","), "->", absl::StrJoin(outputs, ","));
  if (!linear_reduced.empty()) absl::StrAppend(&out, "; sum ", linear_reduced);
  if (!unsplittable.empty()) absl::StrAppend(&out, "; unsplittable ", unsplittable);
  if (!addends.empty()) absl::StrAppend(&out, "; addends ", absl::StrJoin(addends, ","));
  return out;
}

absl::Status ValidateShardingRule(const ShardingRule& r, const CostContext& c) {
  auto bad = [&](auto&&... args) {
    return absl::InternalError(absl::StrCat("node '", c.op.node_name(), "' (", c.op.op(), "): sharding rule '",
                                            r.ToString(), "': ", args...));
  };
  if (static_cast<int>(r.inputs.size()) != c.op.num_inputs()) {
    return bad("has ", r.inputs.size(), " input label strings for ", c.op.num_inputs(), " inputs");
  }
  if (r.outputs.size() != c.outputs.size()) {
    return bad("has ", r.outputs.size(), " output label strings for ", c.outputs.size(), " outputs");
  }
  std::set<char> labelled;  // every label of some dimension
  std::set<char> input_labels;
  auto check = [&](const std::string& labels, const TensorType* t, const std::string& what) -> absl::Status {
    if (t == nullptr) {
      if (!labels.empty()) return bad(what, " is absent but labelled '", labels, "'");
      return absl::OkStatus();
    }
    if (static_cast<int>(labels.size()) != t->rank()) {
      return bad(what, " ", t->ToString(), " has rank ", t->rank(), " but labels '", labels, "'");
    }
    for (size_t d = 0; d < labels.size(); ++d) {
      const char l = labels[d];
      if (l == '\0' || std::strchr(kAlphabet, l) == nullptr) {
        return bad(what, " has a label that is not a letter, digit or allowed punctuation");
      }
      if (labels.find(l) != d) return bad(what, " repeats label '", std::string(1, l), "'");
      labelled.insert(l);
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    MAPD_RETURN_IF_ERROR(check(r.inputs[i], c.op.has_input(i) ? &c.op.input(i) : nullptr, absl::StrCat("input ", i)));
    input_labels.insert(r.inputs[i].begin(), r.inputs[i].end());
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    MAPD_RETURN_IF_ERROR(check(r.outputs[o], &c.outputs[o], absl::StrCat("output ", o)));
  }
  for (char l : r.averaged) {
    if (!r.IsLinearReduced(l)) return bad("averaged label '", std::string(1, l), "' is not linear_reduced");
  }
  for (char l : r.linear_reduced) {
    if (r.IsUnsplittable(l)) return bad("label '", std::string(1, l), "' is both linear_reduced and unsplittable");
    if (!input_labels.count(l)) return bad("linear_reduced label '", std::string(1, l), "' labels no input");
    for (const auto& o : r.outputs) {
      if (o.find(l) != std::string::npos) return bad("linear_reduced label '", std::string(1, l), "' labels an output");
    }
  }
  for (char l : r.unsplittable) {
    if (!labelled.count(l)) return bad("unsplittable label '", std::string(1, l), "' labels no dimension");
  }
  for (int a : r.addends) {
    if (a < 0 || a >= c.op.num_inputs()) return bad("addend ", a, " is not an input");
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    for (char l : input_labels) {
      if (r.outputs[o].find(l) == std::string::npos && !r.IsLinearReduced(l) && !r.IsUnsplittable(l)) {
        return bad("input label '", std::string(1, l), "' is missing from output ", o,
                   " but is neither linear_reduced nor unsplittable");
      }
    }
  }
  return absl::OkStatus();
}

LabelPool::LabelPool(const std::string& reserved) : used_(reserved) {}

char LabelPool::Fresh() {
  const std::string alphabet(kAlphabet);
  while (next_ < alphabet.size()) {
    const char l = alphabet[next_++];
    if (used_.find(l) == std::string::npos) {
      used_.push_back(l);
      return l;
    }
  }
  exhausted_ = true;
  return alphabet.back();
}

std::string LabelPool::Fresh(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(Fresh());
  return s;
}

absl::Status LabelPool::status() const {
  if (!exhausted_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("a sharding rule needs more than ", sizeof(kAlphabet) - 1,
                                                   " labels (tensors of very high rank, or many pieces)"));
}

std::string AlignLabels(const Shape& shape, const Shape& target, const std::string& target_labels, LabelPool& pool,
                        std::string* unsplittable) {
  std::string labels;
  const int lead = static_cast<int>(shape.size()) - static_cast<int>(target.size());
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const int t = d - lead;
    if (t >= 0 && shape[d] == target[t]) {
      labels.push_back(target_labels[t]);
    } else {
      const char l = pool.Fresh();
      unsplittable->push_back(l);
      labels.push_back(l);
    }
  }
  return labels;
}

void ReshapeLabels(const Shape& in, const Shape& out, LabelPool& pool, std::string* in_labels, std::string* out_labels,
                   std::string* unsplittable) {
  in_labels->assign(in.size(), '\0');
  out_labels->assign(out.size(), '\0');
  auto fresh_unsplittable = [&] {
    const char l = pool.Fresh();
    unsplittable->push_back(l);
    return l;
  };
  const bool empty = NumElements(in) == 0 || NumElements(out) == 0;
  std::vector<size_t> ii, oo;  // the dimensions of size > 1
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && !empty) ii.push_back(d);
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] != 1 && !empty) oo.push_back(d);
  }
  size_t i = 0, j = 0;
  while (i < ii.size() && j < oo.size()) {
    const size_t i0 = i, j0 = j;
    int64_t pi = in[ii[i]], po = out[oo[j]];
    while (pi != po) {
      if (pi < po) {
        if (i + 1 == ii.size()) break;
        pi *= in[ii[++i]];
      } else {
        if (j + 1 == oo.size()) break;
        po *= out[oo[++j]];
      }
    }
    const char l = pool.Fresh();
    (*in_labels)[ii[i0]] = l;
    (*out_labels)[oo[j0]] = l;
    ++i;
    ++j;
  }
  // Everything not labelled above: size-1 dimensions and the inner factors of each group.
  for (char& l : *in_labels) {
    if (l == '\0') l = fresh_unsplittable();
  }
  for (char& l : *out_labels) {
    if (l == '\0') l = fresh_unsplittable();
  }
}

ShardingRule EmptyRule(const CostContext& ctx) {
  ShardingRule r;
  r.inputs.assign(ctx.op.num_inputs(), "");
  r.outputs.assign(ctx.outputs.size(), "");
  return r;
}

ShardingRule SameLabelsExcept(const CostContext& c, const std::vector<int>& dims, LabelPool& pool) {
  ShardingRule r = EmptyRule(c);
  const TensorType& x = c.op.input(0);
  r.inputs[0] = pool.Fresh(x.rank());
  auto keep_unsplittable = [&r](char l) {
    if (r.unsplittable.find(l) == std::string::npos) r.unsplittable.push_back(l);
  };
  for (int d : dims) keep_unsplittable(r.inputs[0][d]);
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    r.outputs[o] = r.inputs[0];
    for (int d : dims) {
      if (c.outputs[o].shape[d] == x.shape[d]) continue;
      r.outputs[o][d] = o > 0 && c.outputs[o].shape[d] == c.outputs[0].shape[d] ? r.outputs[0][d] : pool.Fresh();
      keep_unsplittable(r.outputs[o][d]);
    }
  }
  return r;
}

ShardingFn BroadcastRule() {
  return [](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    LabelPool pool;
    const Shape& out = c.outputs[0].shape;
    const std::string labels = pool.Fresh(static_cast<int>(out.size()));
    for (int i = 0; i < c.op.num_inputs(); ++i) {
      if (c.op.has_input(i)) r.inputs[i] = AlignLabels(c.op.input(i).shape, out, labels, pool, &r.unsplittable);
    }
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      r.outputs[o] = AlignLabels(c.outputs[o].shape, out, labels, pool, &r.unsplittable);
    }
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

ShardingFn ReshapeRule() {
  return [](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    LabelPool pool;
    ReshapeLabels(c.op.input(0).shape, c.outputs[0].shape, pool, &r.inputs[0], &r.outputs[0], &r.unsplittable);
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

ShardingFn IdentityRule() {
  return [](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    LabelPool pool;
    r.inputs[0] = pool.Fresh(c.op.input(0).rank());
    r.outputs[0] = r.inputs[0];
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

ShardingFn CreationRule() {
  return [](const CostContext& c) -> absl::StatusOr<ShardingRule> {
    ShardingRule r = EmptyRule(c);
    LabelPool pool;
    for (size_t o = 0; o < c.outputs.size(); ++o) r.outputs[o] = pool.Fresh(c.outputs[o].rank());
    MAPD_RETURN_IF_ERROR(pool.status());
    return r;
  };
}

}  // namespace mapd
