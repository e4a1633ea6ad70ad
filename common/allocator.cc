#include "common/allocator.h"

// <cstdlib> first: it defines __GLIBC__ where the C library is glibc (without a libc header
// before the test, the test is false everywhere and the settings below never applied).
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mapd {

void RetainFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_TOP_PAD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, -1);  // never trim: the largest value
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
}

}  // namespace mapd
