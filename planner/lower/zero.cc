#include "planner/lower/zero.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "model/ir/tensor_type.h"
#include "planner/lower/lowering.h"

namespace mapd {

std::vector<ZeroParam> ZeroParams(const v1::RankProgram& program) {
  if (program.zero_stage() <= 0) return {};
  return GradSyncChains(program);
}

std::vector<ZeroParam> GradSyncChains(const v1::RankProgram& program) {
  std::vector<ZeroParam> out;
  // Readers of every tensor name, by instruction index.
  std::unordered_map<std::string, std::vector<int>> readers;
  for (int i = 0; i < program.instructions_size(); ++i) {
    for (const std::string& in : InstructionReads(program.instructions(i))) readers[in].push_back(i);
  }
  auto grad_sync = [&](int i) -> const v1::Communicate* {
    const v1::Instruction& ins = program.instructions(i);
    return ins.has_communicate() && ins.communicate().kind() == v1::Communicate::GRAD_SYNC ? &ins.communicate() : nullptr;
  };
  for (const v1::Shard& shard : program.parameters()) {
    auto it = readers.find(shard.name());
    if (it == readers.end() || it->second.empty()) continue;
    // Every reader starts a GRAD_SYNC chain; a chain goes on while its output's only reader is
    // another GRAD_SYNC. All chains must cover the same axes.
    bool ok = true;
    std::set<int> axes;
    std::vector<int> steps;
    for (size_t c = 0; c < it->second.size() && ok; ++c) {
      std::set<int> chain;
      int i = it->second[c];
      const v1::Communicate* step = grad_sync(i);
      if (step == nullptr) ok = false;
      while (ok && step != nullptr) {
        ok = chain.insert(step->axis()).second;
        steps.push_back(i);
        auto next = readers.find(step->output());
        step = nullptr;
        if (next != readers.end() && next->second.size() == 1 && grad_sync(next->second[0]) != nullptr) {
          i = next->second[0];
          step = grad_sync(i);
        }
      }
      if (c == 0) axes = chain;
      ok = ok && chain == axes;
    }
    if (!ok || axes.empty()) continue;
    ZeroParam z;
    z.name = shard.name();
    z.axes.assign(axes.begin(), axes.end());
    for (int a : z.axes) {
      z.index = z.index * program.mesh(a) + program.coords(a);
      z.ranks *= program.mesh(a);
    }
    z.numel = TensorType::FromProto(shard.local_type()).NumElements();
    z.chunk = (z.numel + z.ranks - 1) / z.ranks;
    std::sort(steps.begin(), steps.end());
    z.grad_syncs = steps;
    out.push_back(std::move(z));
  }
  return out;
}

std::vector<ZeroParam> BucketedGradSyncs(const v1::RankProgram& program) {
  std::vector<ZeroParam> out;
  if (program.zero_stage() > 1 || program.micro_batches() > 1) return out;
  for (ZeroParam& z : GradSyncChains(program)) {
    if (z.grad_syncs.size() == z.axes.size()) out.push_back(std::move(z));
  }
  return out;
}

namespace {

// Cuts `sizes` (in order) into contiguous groups whose sums stay within `cap`, each as full as
// it can be (a size over `cap` is a group of its own); returns each group's first index.
std::vector<size_t> GroupsWithin(const std::vector<int64_t>& sizes, int64_t cap) {
  std::vector<size_t> firsts;
  int64_t sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (firsts.empty() || sum + sizes[i] > cap) {
      firsts.push_back(i);
      sum = 0;
    }
    sum += sizes[i];
  }
  return firsts;
}

// The least cap M for which GroupsWithin(sizes, M) makes at most `k` groups — the linear
// partition problem: min over cuts into ≤ k contiguous groups of the largest group's sum. The
// greedy fill makes the fewest groups for a given cap and their count only falls as the cap
// grows, so M is found by bisection over [max size, Σ sizes].
int64_t LeastCapForGroups(const std::vector<int64_t>& sizes, size_t k) {
  int64_t lo = 0, hi = 0;
  for (int64_t s : sizes) {
    lo = std::max(lo, s);
    hi += s;
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (GroupsWithin(sizes, mid).size() <= k) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

// A set of parameters, in gradient order, with chunks c_1..c_n (elements of a row each) and
// B = ranks × Σ c_i × the element size bytes, is cut into
//   k = min(n, max(parts, ⌈B / bucket_bytes⌉))
// contiguous buckets minimising the largest segment (the staging and gather buffers' size):
//   M = min over cuts into ≤ k groups of max_g Σ_{i∈g} c_i,
// then filled greedily under M (which makes at most k). A greedy fill under B / parts instead
// left a runt: nanoGPT's halves were buckets of 99328, 99072 and 32768 elements — three
// collectives where two of 115-116K do, and ZeRO-3 gathered five times a step instead of two.
std::vector<ZeroBucketSet> ZeroGradientBuckets(const v1::RankProgram& program, int64_t bucket_bytes) {
  std::vector<ZeroBucketSet> sets;
  if (program.zero_stage() < 2 || program.micro_batches() > 1 || bucket_bytes <= 0 || program.zero_bucket_parts() < 0) return sets;
  const int parts = program.zero_bucket_parts() > 0 ? program.zero_bucket_parts() : DefaultZeroBucketParts(program.zero_stage());
  std::unordered_map<std::string, v1::DType> dtype_of;
  for (const v1::Shard& shard : program.parameters()) dtype_of[shard.name()] = shard.local_type().dtype();
  std::vector<ZeroParam> chosen;
  for (ZeroParam& z : ZeroParams(program)) {
    if (z.axes.size() == 1 && z.ranks > 1) chosen.push_back(std::move(z));
  }
  // The parameter read last in forward first: backward makes its gradient first.
  // (A parameter read twice — a tied weight — by its first reader: its last gradient comes then.)
  std::stable_sort(chosen.begin(), chosen.end(), [](const ZeroParam& a, const ZeroParam& b) { return a.grad_syncs[0] > b.grad_syncs[0]; });
  std::map<std::pair<int, int>, int> set_of;  // (axis, dtype) → index in sets
  for (ZeroParam& z : chosen) {
    const v1::DType dtype = dtype_of[z.name];
    auto [it, added] = set_of.emplace(std::make_pair(z.axes[0], static_cast<int>(dtype)), static_cast<int>(sets.size()));
    if (added) {
      sets.emplace_back();
      sets.back().axis = z.axes[0];
      sets.back().dtype = dtype;
      sets.back().ranks = z.ranks;
    }
    sets[it->second].params.push_back(std::move(z));
  }
  for (ZeroBucketSet& set : sets) {
    std::vector<int64_t> chunks;
    for (const ZeroParam& z : set.params) chunks.push_back(z.chunk);
    const int64_t row_bytes = set.ranks * DTypeSize(set.dtype);  // bytes per element of a row
    int64_t set_bytes = 0;
    for (int64_t c : chunks) set_bytes += c * row_bytes;
    const int64_t by_size = (set_bytes + bucket_bytes - 1) / bucket_bytes;
    const size_t k = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(chunks.size()), std::max<int64_t>(parts, by_size)));
    std::vector<size_t> firsts = GroupsWithin(chunks, LeastCapForGroups(chunks, k));
    firsts.push_back(chunks.size());
    for (size_t g = 0; g + 1 < firsts.size(); ++g) {
      ZeroBucket& b = set.buckets.emplace_back();
      for (size_t i = firsts[g]; i < firsts[g + 1]; ++i) {
        b.params.push_back(static_cast<int>(i));
        b.offsets.push_back(b.segment);
        b.segment += chunks[i];
      }
    }
    set.staging_buffers = std::min<int64_t>(2, static_cast<int64_t>(set.buckets.size()));
    for (const ZeroBucket& b : set.buckets) set.staging_elements = std::max(set.staging_elements, set.ranks * b.segment);
  }
  return sets;
}

}  // namespace mapd
