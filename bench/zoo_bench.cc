// Times building each zoo model with its default options (and verifying it once), and prints
// the build time against a 1-second budget: the planner must be able to start from any zoo
// model, however large, without waiting on graph construction.
//
//   zoo_bench [repeats]   (default 5; the first, untimed build warms the op registry)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/graph/verifier.h"
#include "model/ir/graph.h"
#include "model/zoo/zoo.h"

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  constexpr double kBudgetMs = 1000;
  int failures = 0;
  for (const auto& model : mapd::ListZooModels()) {
    auto warm = mapd::BuildZooModel(model.name);
    if (!warm.ok()) {
      std::fprintf(stderr, "%s: %s\n", model.name.c_str(), std::string(warm.status().message()).c_str());
      ++failures;
      continue;
    }
    double total_ms = 0;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto g = mapd::BuildZooModel(model.name);
      total_ms += MsSince(start);
    }
    const double build_ms = total_ms / repeats;
    const auto start = std::chrono::steady_clock::now();
    auto graph = mapd::MakeVerifiedGraph(*std::move(warm));
    const double verify_ms = MsSince(start);
    if (!graph.ok()) {
      std::fprintf(stderr, "%s: %s\n", model.name.c_str(), std::string(graph.status().message()).c_str());
      ++failures;
      continue;
    }
    std::printf("%-12s nodes=%-5d params=%-12lld build_ms=%-7.1f ratio_to_1s=%-6.3f verify_ms=%.1f\n",
                model.name.c_str(), graph->num_nodes(), static_cast<long long>(graph->NumTrainableParameters()),
                build_ms, build_ms / kBudgetMs, verify_ms);
    if (build_ms > kBudgetMs) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
