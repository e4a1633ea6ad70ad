#include "worker/runtime/blas_threads.h"

#include <dlfcn.h>

namespace mapd {

bool SetBlasThreads(int threads) {
  if (threads < 1) return false;
  // Looked up, not linked: LibTorch may come with another BLAS, or none that exports this.
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(threads);
  return true;
}

}  // namespace mapd
