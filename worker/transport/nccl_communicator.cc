// Built when the CUDA toolkit and NCCL are present (MAPD_WITH_CUDA=auto|on).
#include "worker/transport/nccl_communicator.h"

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mapd {

bool NcclBackendBuilt() { return true; }

namespace {

absl::StatusOr<ncclDataType_t> NcclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    default: return absl::InvalidArgumentError(absl::StrCat("NCCL cannot move ", c10::toString(t), " tensors"));
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int device, int rank, int size, std::string name)
      : comm_(comm), stream_(stream), device_(device), rank_(rank), size_(size), name_(std::move(name)) {}
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (buffer_ != nullptr) cudaFree(buffer_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  absl::Status AllReduceSum(at::Tensor& t) override {
    at::Tensor c = t.contiguous();
    auto type = NcclType(c.scalar_type());
    if (!type.ok()) return type.status();
    auto buf = Stage(c, c.nbytes());
    if (!buf.ok()) return buf.status();
    if (auto st = Nccl("all-reduce", ncclAllReduce(*buf, *buf, c.numel(), *type, ncclSum, comm_, stream_)); !st.ok()) return st;
    if (auto st = Unstage(*buf, c); !st.ok()) return st;
    if (!c.is_same(t)) t.copy_(c);
    return absl::OkStatus();
  }

  absl::StatusOr<at::Tensor> AllGather(const at::Tensor& local, int64_t dim) override {
    const at::Tensor in = local.contiguous();
    auto type = NcclType(in.scalar_type());
    if (!type.ok()) return type.status();
    std::vector<int64_t> shape{size_};
    for (int64_t s : in.sizes()) shape.push_back(s);
    at::Tensor out = at::empty(shape, in.options());
    // In place: this rank's piece at its offset of the receive buffer.
    auto buf = Reserve(out.nbytes());
    if (!buf.ok()) return buf.status();
    char* mine = static_cast<char*>(*buf) + rank_ * in.nbytes();
    if (auto st = Copy(mine, in.data_ptr(), in.nbytes()); !st.ok()) return st;
    if (auto st = Nccl("all-gather", ncclAllGather(mine, *buf, in.numel(), *type, comm_, stream_)); !st.ok()) return st;
    if (auto st = Unstage(*buf, out); !st.ok()) return st;
    return at::cat(out.unbind(0), dim);
  }

  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& full, int64_t dim) override {
    // Chunk j (along dim) is rank j's: stack the chunks so they lie in rank order in memory.
    const at::Tensor in = at::stack(full.chunk(size_, dim), 0).contiguous();
    at::Tensor mine = in[rank_].clone();
    if (auto st = ReduceScatterRows(in, mine); !st.ok()) return st;
    return mine;
  }

  // Done at once, as NCCL's other collectives here (the stream is synchronised after each).
  absl::StatusOr<std::unique_ptr<PendingCollective>> ReduceScatterRowsAsync(at::Tensor& rows) override {
    if (!rows.is_contiguous() || rows.dim() != 2 || rows.size(0) != size_) return Communicator::ReduceScatterRowsAsync(rows);
    at::Tensor mine = rows[rank_];
    if (auto st = ReduceScatterRows(rows, mine); !st.ok()) return st;
    return std::unique_ptr<PendingCollective>(new internal::DoneCollective());
  }

  absl::StatusOr<at::Tensor> AllToAll(const at::Tensor& local, int64_t split_dim, int64_t concat_dim) override {
    const at::Tensor in = at::stack(local.chunk(size_, split_dim), 0).contiguous();
    auto type = NcclType(in.scalar_type());
    if (!type.ok()) return type.status();
    at::Tensor out = at::empty_like(in);
    const size_t bytes = in.nbytes();
    auto buf = Stage(in, 2 * bytes);  // send half, then receive half
    if (!buf.ok()) return buf.status();
    char* send = static_cast<char*>(*buf);
    char* recv = send + bytes;
    const size_t piece = bytes / size_;
    const int64_t count = in.numel() / size_;
    ncclGroupStart();
    for (int peer = 0; peer < size_; ++peer) {
      ncclSend(send + peer * piece, count, *type, peer, comm_, stream_);
      ncclRecv(recv + peer * piece, count, *type, peer, comm_, stream_);
    }
    if (auto st = Nccl("all-to-all", ncclGroupEnd()); !st.ok()) return st;
    if (auto st = Unstage(recv, out); !st.ok()) return st;
    return at::cat(out.unbind(0), concat_dim);
  }

  absl::Status Barrier() override {
    at::Tensor one = at::ones({1});
    return AllReduceSum(one);
  }

  // Pipeline stages' point-to-point needs sends that return before the peer receives (1F1B has
  // both neighbours send at once); this backend stages every transfer synchronously, so they
  // are not offered yet.
  absl::StatusOr<std::unique_ptr<PendingSend>> Send(const at::Tensor&, int, int) override { return NotBuilt(); }
  absl::Status Recv(at::Tensor&, int, int) override { return NotBuilt(); }

 private:
  absl::Status NotBuilt() const {
    return absl::UnimplementedError(absl::StrCat(name_, ": point-to-point transfers (pipeline stages) over NCCL are not built yet; ",
                                                 "run pipeline plans on --device cpu (Gloo)"));
  }
  absl::Status Cuda(const char* what, cudaError_t e) const {
    if (e == cudaSuccess) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(name_, ": ", what, " on cuda:", device_, " failed: ", cudaGetErrorString(e)));
  }
  absl::Status Nccl(const char* what, ncclResult_t r) {
    if (r != ncclSuccess) {
      return absl::UnavailableError(absl::StrCat(name_, ": ", what, " failed: ", ncclGetErrorString(r), " (",
                                                 ncclGetLastError(comm_), ")"));
    }
    return Cuda(what, cudaStreamSynchronize(stream_));
  }
  // A device buffer of at least `bytes`.
  absl::StatusOr<void*> Reserve(size_t bytes) {
    if (auto st = Cuda("cudaSetDevice", cudaSetDevice(device_)); !st.ok()) return st;
    if (bytes > capacity_) {
      if (buffer_ != nullptr) cudaFree(buffer_);
      buffer_ = nullptr;
      capacity_ = 0;
      if (auto st = Cuda("cudaMalloc", cudaMalloc(&buffer_, bytes)); !st.ok()) return st;
      capacity_ = bytes;
    }
    return buffer_;
  }
  // cudaMemcpyDefault: the direction from the pointers (a CPU tensor, or a CUDA one with a
  // CUDA LibTorch).
  absl::Status Copy(void* dst, const void* src, size_t bytes) {
    return Cuda("cudaMemcpy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }
  // `t` copied to a device buffer of at least `bytes` (its start).
  absl::StatusOr<void*> Stage(const at::Tensor& t, size_t bytes) {
    auto buf = Reserve(bytes);
    if (!buf.ok()) return buf.status();
    if (auto st = Copy(*buf, t.data_ptr(), t.nbytes()); !st.ok()) return st;
    return *buf;
  }
  absl::Status Unstage(const void* device, at::Tensor& t) {
    if (auto st = Copy(t.data_ptr(), device, t.nbytes()); !st.ok()) return st;
    return Cuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

  // `rows` ([size_, n], contiguous) staged and reduce-scattered in place; this rank's row of the
  // sums copied into `mine` (contiguous, n elements).
  absl::Status ReduceScatterRows(const at::Tensor& rows, at::Tensor& mine) {
    auto type = NcclType(rows.scalar_type());
    if (!type.ok()) return type.status();
    auto buf = Stage(rows, rows.nbytes());
    if (!buf.ok()) return buf.status();
    char* recv = static_cast<char*>(*buf) + rank_ * mine.nbytes();  // in place
    if (auto st = Nccl("reduce-scatter", ncclReduceScatter(*buf, recv, mine.numel(), *type, ncclSum, comm_, stream_));
        !st.ok()) {
      return st;
    }
    return Unstage(recv, mine);
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_, rank_, size_;
  std::string name_;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const c10::intrusive_ptr<c10d::Store>& store,
                                                                   int group_rank, int group_size, int cuda_device,
                                                                   const std::string& name) {
  auto fail = [&](const char* what, const std::string& why) {
    return absl::UnavailableError(absl::StrCat(name, ": ", what, " on cuda:", cuda_device, " failed: ", why));
  };
  if (cudaError_t e = cudaSetDevice(cuda_device); e != cudaSuccess) return fail("cudaSetDevice", cudaGetErrorString(e));
  ncclUniqueId id;
  try {
    if (group_rank == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return fail("ncclGetUniqueId", ncclGetErrorString(r));
      store->set("nccl-id", std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
    } else {
      const std::vector<uint8_t> bytes = store->get("nccl-id");  // waits for group rank 0, up to the store's timeout
      if (bytes.size() != sizeof(id)) return fail("rendezvous", absl::StrCat("the NCCL id has ", bytes.size(), " bytes"));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat(name, ": NCCL rendezvous failed: ", e.what()));
  }
  ncclComm_t comm;
  if (ncclResult_t r = ncclCommInitRank(&comm, group_size, id, group_rank); r != ncclSuccess) {
    return fail("ncclCommInitRank", ncclGetErrorString(r));
  }
  cudaStream_t stream;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    ncclCommDestroy(comm);
    return fail("cudaStreamCreate", cudaGetErrorString(e));
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(comm, stream, cuda_device, group_rank, group_size, name));
}

}  // namespace mapd
