#include "planner/lower/zero.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "planner/ir/tensor_type.h"
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
  if (program.zero_stage() != 0 || program.micro_batches() > 1) return out;
  for (ZeroParam& z : GradSyncChains(program)) {
    if (z.axes.size() == 1 && z.grad_syncs.size() == 1) out.push_back(std::move(z));
  }
  return out;
}

}  // namespace mapd
