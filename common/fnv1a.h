// FNV-1a, 64-bit: a hash of bytes that is the same in every process, platform and build (unlike
// std::hash and absl::Hash) — for seeds derived from names, layout fingerprints checkpoints
// record, and measured profiles' names.
#ifndef MAPD_COMMON_FNV1A_H_
#define MAPD_COMMON_FNV1A_H_

#include <cstdint>
#include <string_view>

namespace mapd {

inline constexpr uint64_t kFnv1aOffset = 0xCBF29CE484222325ull;

// The hash of `bytes`, continuing from `h` (kFnv1aOffset to start): Fnv1a(b, Fnv1a(a)) is the
// hash of a followed by b.
inline uint64_t Fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace mapd

#endif  // MAPD_COMMON_FNV1A_H_
