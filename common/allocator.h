// Process-wide allocator settings for the programs that plan and train (mapctl and its rank
// processes, mapd, the benchmarks).
#ifndef MAPD_COMMON_ALLOCATOR_H_
#define MAPD_COMMON_ALLOCATOR_H_

namespace mapd {

// A plan search builds and frees cost graphs by the hundred (about a gigabyte live at its peak
// for a 70B model on 512 devices). glibc's defaults hand freed memory back to the kernel and
// serve large blocks with fresh mappings, so the same pages are faulted in and zeroed again and
// again: about a third of a second of system time in such a search. A training step frees and
// allocates its activations every step: with the defaults a 2-rank ResNet step spent 16% of its
// time faulting them in again (perf), 71 ms a step against 39 ms. This keeps freed memory in
// the process (top pad 256 MiB, no trimming, mappings only for blocks of 32 MiB and more).
// Call once, first thing in main; a no-op where the C library is not glibc.
void RetainFreedMemory();

}  // namespace mapd

#endif  // MAPD_COMMON_ALLOCATOR_H_
