// Seeds for the libFuzzer harnesses (docs/architecture.md, "Fuzzing").
//
// A harness knows best what a well-formed input to its target looks like, so it writes its own
// seed corpus: run with MAPD_FUZZ_WRITE_SEEDS=DIR, it writes each seed to DIR/seed-N and exits
// before fuzzing (scripts/fuzz.sh does this, then fuzzes from DIR). Seeds are serialized protos
// built through the same code clients use (the zoo, the job spec's fields), so the mutations
// start from inputs that get past parsing and into the checks.
#ifndef MAPD_FUZZ_FUZZ_SEEDS_H_
#define MAPD_FUZZ_FUZZ_SEEDS_H_

#include <functional>
#include <string>
#include <vector>

namespace mapd::fuzz {

// When MAPD_FUZZ_WRITE_SEEDS is set: writes make_seeds()'s strings there and exits the process
// (0, or 1 when a seed cannot be written). Otherwise returns without calling make_seeds.
void WriteSeedsIfAsked(const std::function<std::vector<std::string>()>& make_seeds);

// Small zoo models' training graphs, serialized (v1::Graph), one per family.
std::vector<std::string> SmallZooGraphs();

}  // namespace mapd::fuzz

#endif  // MAPD_FUZZ_FUZZ_SEEDS_H_
