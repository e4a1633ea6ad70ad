#include "worker/rank/collectives.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

at::Tensor ChunkOf(const at::Tensor& x, Communicator& group, int64_t dim) { return x.chunk(group.size(), dim)[group.rank()].contiguous(); }

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Collective failures inside autograd travel as exceptions.
at::Tensor OrThrow(absl::StatusOr<at::Tensor> t) {
  if (!t.ok()) throw std::runtime_error(std::string(t.status().ToString()));
  return *std::move(t);
}
void OrThrow(const absl::Status& st) {
  if (!st.ok()) throw std::runtime_error(std::string(st.ToString()));
}

Communicator* GroupOf(AutogradContext* ctx) {
  return reinterpret_cast<Communicator*>(ctx->saved_data["group"].toInt());
}
void Keep(AutogradContext* ctx, Communicator& g, int64_t dim = -1, int64_t to_dim = -1) {
  ctx->saved_data["group"] = reinterpret_cast<int64_t>(&g);
  ctx->saved_data["dim"] = dim;
  ctx->saved_data["to_dim"] = to_dim;
}
int64_t Dim(AutogradContext* ctx) { return ctx->saved_data["dim"].toInt(); }
int64_t ToDim(AutogradContext* ctx) { return ctx->saved_data["to_dim"].toInt(); }

at::Tensor AllReduced(const at::Tensor& x, Communicator& g) {
  at::Tensor y = x.contiguous().clone();
  OrThrow(g.AllReduceSum(y));
  return y;
}

// P→R: sum; backward identity.
struct AllReduceFn : torch::autograd::Function<AllReduceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g) {
    Keep(ctx, *g);
    return AllReduced(x, *g);
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], at::Tensor()}; }
};

// S(dim)→R: gather; backward this rank's slice.
struct AllGatherFn : torch::autograd::Function<AllGatherFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g, int64_t dim) {
    Keep(ctx, *g, dim);
    return OrThrow(g->AllGather(x, dim));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {ChunkOf(grad[0], *GroupOf(ctx), Dim(ctx)), at::Tensor(), at::Tensor()};
  }
};

// P→S(dim): reduce-scatter; backward all-gather.
struct ReduceScatterFn : torch::autograd::Function<ReduceScatterFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g, int64_t dim) {
    Keep(ctx, *g, dim);
    return OrThrow(g->ReduceScatter(x, dim));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {OrThrow(GroupOf(ctx)->AllGather(grad[0], Dim(ctx))), at::Tensor(), at::Tensor()};
  }
};

// S(dim)→S(to_dim): all-to-all; backward the inverse.
struct AllToAllFn : torch::autograd::Function<AllToAllFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g, int64_t dim, int64_t to_dim) {
    Keep(ctx, *g, dim, to_dim);
    return OrThrow(g->AllToAll(x, /*split_dim=*/to_dim, /*concat_dim=*/dim));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {OrThrow(GroupOf(ctx)->AllToAll(grad[0], /*split_dim=*/Dim(ctx), /*concat_dim=*/ToDim(ctx))), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

// R→S(dim): this rank's slice; backward all-gather.
struct SliceFn : torch::autograd::Function<SliceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g, int64_t dim) {
    Keep(ctx, *g, dim);
    return ChunkOf(x, *g, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {OrThrow(GroupOf(ctx)->AllGather(grad[0], Dim(ctx))), at::Tensor(), at::Tensor()};
  }
};

// R→P: the first rank keeps the value, the others zeros; backward identity (a Partial value's
// gradient is replicated).
struct KeepOnFirstFn : torch::autograd::Function<KeepOnFirstFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g) {
    Keep(ctx, *g);
    return g->rank() == 0 ? x.clone() : at::zeros_like(x);
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], at::Tensor()}; }
};

// S(dim)→P: this rank's slice in zeros of the full size; backward the slice.
struct ScatterToPartialFn : torch::autograd::Function<ScatterToPartialFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g, int64_t dim) {
    Keep(ctx, *g, dim);
    std::vector<int64_t> shape = x.sizes().vec();
    const int64_t local = shape[dim];
    shape[dim] = local * g->size();
    at::Tensor full = at::zeros(shape, x.options());
    full.narrow(dim, g->rank() * local, local).copy_(x);
    return full;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {ChunkOf(grad[0], *GroupOf(ctx), Dim(ctx)), at::Tensor(), at::Tensor()};
  }
};

// Identity; backward all-reduce (a replicated value the ranks use differently).
struct GradSyncFn : torch::autograd::Function<GradSyncFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* g) {
    Keep(ctx, *g);
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {AllReduced(grad[0], *GroupOf(ctx)), at::Tensor()};
  }
};

// A GRAD_SYNC whose all-reduce a gradient bucket does: the identity forward; backward hands the
// gradient to its bucket and none to the parameter (GradBuckets::Finish sets the summed one).
struct BucketedGradSyncFn : torch::autograd::Function<BucketedGradSyncFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GradBuckets* buckets, int64_t slot) {
    ctx->saved_data["buckets"] = reinterpret_cast<int64_t>(buckets);
    ctx->saved_data["slot"] = slot;
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    auto* buckets = reinterpret_cast<GradBuckets*>(ctx->saved_data["buckets"].toInt());
    if (grad[0].defined()) buckets->Ready(static_cast<int>(ctx->saved_data["slot"].toInt()), grad[0]);
    return {at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor BucketedGradSync(const at::Tensor& x, GradBuckets* buckets, int slot) {
  return BucketedGradSyncFn::apply(x, buckets, static_cast<int64_t>(slot));
}

absl::StatusOr<at::Tensor> ApplyCommunicate(const v1::Communicate& step, const at::Tensor& x, Communicator& group) {
  try {
    switch (step.kind()) {
      case v1::Communicate::ALL_REDUCE: return AllReduceFn::apply(x, &group);
      case v1::Communicate::ALL_GATHER: return AllGatherFn::apply(x, &group, step.dim());
      case v1::Communicate::REDUCE_SCATTER: return ReduceScatterFn::apply(x, &group, step.dim());
      case v1::Communicate::ALL_TO_ALL: return AllToAllFn::apply(x, &group, step.dim(), step.to_dim());
      case v1::Communicate::SLICE: return SliceFn::apply(x, &group, step.dim());
      case v1::Communicate::KEEP_ON_FIRST: return KeepOnFirstFn::apply(x, &group);
      case v1::Communicate::SCATTER_TO_PARTIAL: return ScatterToPartialFn::apply(x, &group, step.dim());
      case v1::Communicate::GRAD_SYNC: return GradSyncFn::apply(x, &group);
      default: break;
    }
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kUnavailable,
                      absl::StrCat(v1::Communicate::Kind_Name(step.kind()), " of '", step.input(), "' on ", group.name()), e);
  }
  return absl::InvalidArgumentError(absl::StrCat("communicate step '", step.output(), "' has no kind"));
}

absl::StatusOr<std::vector<at::Tensor>> AllReduceSumCoalesced(const std::vector<at::Tensor>& tensors, Communicator& group) {
  std::vector<at::Tensor> sums(tensors.size());
  std::vector<bool> done(tensors.size(), false);
  try {
    for (size_t first = 0; first < tensors.size(); ++first) {
      if (done[first]) continue;
      std::vector<size_t> same;  // the tensors of `first`'s dtype
      std::vector<at::Tensor> flat;
      for (size_t k = first; k < tensors.size(); ++k) {
        if (done[k] || tensors[k].scalar_type() != tensors[first].scalar_type()) continue;
        same.push_back(k);
        flat.push_back(tensors[k].detach().reshape({-1}));
        done[k] = true;
      }
      at::Tensor all = at::cat(flat);  // a new tensor: the inputs stay as they were
      if (auto st = group.AllReduceSum(all); !st.ok()) return st;
      int64_t at_element = 0;
      for (size_t k : same) {
        sums[k] = all.narrow(0, at_element, tensors[k].numel()).view(tensors[k].sizes());
        at_element += tensors[k].numel();
      }
    }
  } catch (const std::exception& e) {
    return TorchError(absl::StatusCode::kUnavailable, absl::StrCat("coalesced all-reduce on ", group.name()), e);
  }
  return sums;
}

namespace {

// `t` flattened and zero-padded to z.ranks × z.chunk elements.
at::Tensor PaddedFlat(const at::Tensor& t, const ZeroParam& z) {
  at::Tensor flat = t.reshape({-1});
  if (flat.numel() < z.ranks * z.chunk) flat = at::constant_pad_nd(flat, {0, z.ranks * z.chunk - flat.numel()});
  return flat;
}

}  // namespace

at::Tensor FlatShard(const at::Tensor& full, const ZeroParam& z) {
  return PaddedFlat(full.detach(), z).narrow(0, z.index * z.chunk, z.chunk).clone();
}

absl::StatusOr<at::Tensor> ReduceScatterShard(const at::Tensor& full, const ZeroParam& z,
                                              const std::vector<Communicator*>& groups) {
  at::Tensor x = PaddedFlat(full, z);
  for (int a : z.axes) {
    auto part = groups.at(a)->ReduceScatter(x, 0);
    if (!part.ok()) return part.status();
    x = *std::move(part);
  }
  return x;
}

absl::StatusOr<at::Tensor> GatherShards(const at::Tensor& shard, const ZeroParam& z, const std::vector<Communicator*>& groups,
                                        at::IntArrayRef shape) {
  at::Tensor x = shard.detach();
  for (auto a = z.axes.rbegin(); a != z.axes.rend(); ++a) {
    auto whole = groups.at(*a)->AllGather(x, 0);
    if (!whole.ok()) return whole.status();
    x = *std::move(whole);
  }
  return x.narrow(0, 0, z.numel).view(shape);
}

bool BlockGathered(const at::Tensor& block) { return block.storage().nbytes() > 0; }

void FreeBlock(const at::Tensor& block) {
  c10::StorageImpl* storage = block.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, block.device()));  // the old memory goes back
  storage->set_nbytes(0);
}

at::Tensor AllocateBlock(const at::Tensor& block) {
  c10::StorageImpl* storage = block.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(block.numel()) * block.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  // A separate tensor on the same storage: writing through it leaves the block's version alone.
  at::Tensor alias = at::empty({0}, block.options().requires_grad(false));
  alias.set_(block.storage(), 0, block.sizes(), block.strides());
  return alias;
}

absl::Status GatherBlock(const at::Tensor& block, const at::Tensor& shard, const ZeroParam& z,
                         const std::vector<Communicator*>& groups) {
  if (BlockGathered(block)) return absl::OkStatus();
  auto whole = GatherShards(shard, z, groups, block.sizes());
  if (!whole.ok()) return whole.status();
  at::NoGradGuard no_grad;
  AllocateBlock(block).copy_(*whole);
  return absl::OkStatus();
}

namespace {

// ZeRO's parameter read in forward: the block's values (gathered first under stage 3); backward
// reduce-scatters the block's gradient into the shard, or hands it to the parameter's bucket
// (and under stage 3 frees the block: every reader's backward has run).
struct ZeroParameterFn : torch::autograd::Function<ZeroParameterFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& shard, const at::Tensor& block, const ZeroParam* z,
                            const std::vector<Communicator*>* groups, bool gathered, ZeroBuckets* buckets, int64_t slot) {
    ctx->saved_data["z"] = reinterpret_cast<int64_t>(z);
    ctx->saved_data["groups"] = reinterpret_cast<int64_t>(groups);
    ctx->saved_data["buckets"] = reinterpret_cast<int64_t>(buckets);
    ctx->saved_data["slot"] = slot;
    if (gathered) {
      ctx->saved_data["block"] = block;
      OrThrow(buckets != nullptr ? buckets->GatherBlock(static_cast<int>(slot)) : GatherBlock(block, shard, *z, *groups));
    }
    return block.view_as(block);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto* z = reinterpret_cast<const ZeroParam*>(ctx->saved_data["z"].toInt());
    const auto* groups = reinterpret_cast<const std::vector<Communicator*>*>(ctx->saved_data["groups"].toInt());
    auto* buckets = reinterpret_cast<ZeroBuckets*>(ctx->saved_data["buckets"].toInt());
    at::Tensor shard_grad;
    if (buckets == nullptr) {
      shard_grad = OrThrow(ReduceScatterShard(grad[0], *z, *groups));
    } else if (grad[0].defined()) {
      buckets->Ready(static_cast<int>(ctx->saved_data["slot"].toInt()), grad[0]);
    }
    if (ctx->saved_data.count("block")) FreeBlock(ctx->saved_data["block"].toTensor());
    return {shard_grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ZeroParameter(const at::Tensor& shard, const at::Tensor& full, const ZeroParam* z,
                         const std::vector<Communicator*>* groups, bool gathered, ZeroBuckets* buckets, int slot) {
  return ZeroParameterFn::apply(shard, full, z, groups, gathered, buckets, static_cast<int64_t>(slot));
}

}  // namespace mapd
