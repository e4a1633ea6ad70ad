// Deterministic seeds: every random tensor of a run (a parameter's init, a data batch, a
// step's dropout) comes from a generator seeded with DeriveSeed(run seed, what it is for), so
// two runs with the same seed draw the same numbers whatever else they do — and every plan
// starts from the same global weights. Header-only, no LibTorch.
#ifndef MAPD_WORKER_RUNTIME_SEED_H_
#define MAPD_WORKER_RUNTIME_SEED_H_

#include <cstdint>
#include <string_view>

#include "common/fnv1a.h"

namespace mapd {

// SplitMix64 (Steele et al.): a tiny, well-mixed 64-bit generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n > 0 (the modulo bias is below 2^-40 for n < 2^24).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// A seed for `purpose` (a parameter name, "data", "step:12") under the run's `seed`: FNV-1a of
// the text, mixed with the seed. Stable across processes, platforms and builds (unlike
// std::hash and absl::Hash).
inline uint64_t DeriveSeed(uint64_t seed, std::string_view purpose) {
  SplitMix64 mix(Fnv1a(purpose) ^ (seed * 0x9E3779B97F4A7C15ull));
  return mix.Next();
}

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_SEED_H_
