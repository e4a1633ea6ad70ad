#include "fuzz/fuzz_seeds.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "model/zoo/zoo.h"

namespace mapd::fuzz {

void WriteSeedsIfAsked(const std::function<std::vector<std::string>()>& make_seeds) {
  const char* dir = std::getenv("MAPD_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  const std::vector<std::string> seeds = make_seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string path = std::string(dir) + "/seed-" + std::to_string(i);
    std::ofstream out(path, std::ios::binary);
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
    if (!out) {
      std::fprintf(stderr, "cannot write the seed %s\n", path.c_str());
      std::exit(1);
    }
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(0);
}

std::vector<std::string> SmallZooGraphs() {
  // One small model per family: small enough that a mutated copy verifies in microseconds.
  const char* specs[] = {
      "mlp",
      "gpt2:layers=1,hidden=32,heads=2,vocab=64,seq=8,batch=2",
      "llama2-7b:layers=1,hidden=32,heads=4,kv_heads=2,ffn=64,vocab=64,seq=8,batch=1",
      "bert-large:layers=1,hidden=32,heads=2,vocab=64,seq=8,batch=2",
      "vit-base:layers=1,hidden=32,heads=2,image=32,patch=16,batch=2",
      "resnet50:image=32,batch=2,classes=10",
  };
  std::vector<std::string> seeds;
  for (const char* spec : specs) {
    auto graph = BuildZooModel(spec);
    if (!graph.ok()) {
      std::fprintf(stderr, "seed %s: %s\n", spec, std::string(graph.status().message()).c_str());
      std::exit(1);
    }
    seeds.push_back(graph->SerializeAsString());
  }
  return seeds;
}

}  // namespace mapd::fuzz
