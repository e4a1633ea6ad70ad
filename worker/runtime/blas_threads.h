// The BLAS library's own thread pool, kept to LibTorch's intra-op thread count.
//
// Debian's LibTorch multiplies matrices with OpenBLAS (the pthread build), which starts its own
// pool of one thread per logical CPU in every process, whatever at::set_num_threads says: a
// process meant to use one thread (a rank, given OMP_NUM_THREADS=1 by its launcher — OpenBLAS
// reads that variable too — or `mapctl run` on one device, where LibTorch takes one thread per
// physical core) multiplied on two, and `mapctl calibrate` measured matrix products at rates
// no rank of the plans it served would see. MAP keeps the two counts equal so that "ranks x
// threads <= cores" holds for matrix products too and a calibration measures what ranks run.
#ifndef MAPD_WORKER_RUNTIME_BLAS_THREADS_H_
#define MAPD_WORKER_RUNTIME_BLAS_THREADS_H_

namespace mapd {

// Sets the BLAS library's thread count to `threads` (>= 1) where it exposes one at run time
// (OpenBLAS: openblas_set_num_threads, looked up among the loaded libraries); returns whether
// it did (false: no such BLAS here, e.g. MKL, whose threads LibTorch already sets).
bool SetBlasThreads(int threads);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_BLAS_THREADS_H_
