// Building a zoo model must not allocate its weights: llama2-70b (~276 GB of f32 weights)
// has to build in a few MiB. Global operator new/delete are replaced by counting versions.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "gtest/gtest.h"
#include "model/zoo/zoo.h"

namespace {
std::atomic<uint64_t> g_allocated_bytes{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocated_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace mapd {
namespace {

TEST(ZooAllocTest, Llama2_70bBuildsWithoutAllocatingWeights) {
  const uint64_t before = g_allocated_bytes.load();
  auto graph = BuildZooModel("llama2-70b");
  const uint64_t allocated = g_allocated_bytes.load() - before;
  ASSERT_TRUE(graph.ok()) << graph.status();

  int64_t params = 0;
  for (const auto& p : graph->parameters()) {
    if (!p.trainable()) continue;
    int64_t n = 1;
    for (int64_t d : p.type().shape()) n *= d;
    params += n;
  }
  EXPECT_EQ(params, 68976648192);
  EXPECT_GT(allocated, 0u) << "the counting operator new is not in use";
  EXPECT_LT(allocated, uint64_t{256} << 20) << "building llama2-70b allocated " << (allocated >> 20) << " MiB";
  std::printf("llama2-70b: %d nodes, %.1f MiB allocated in total while building\n", graph->nodes_size(),
              allocated / 1048576.0);
}

}  // namespace
}  // namespace mapd
