// Where the runtime's tensors come from: parameters (parameters.h) and data batches (data.h).
// One translation unit for both keeps the number of LibTorch-including files small.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/ir/graph.h"
#include "model/ops/shape_util.h"
#include "worker/runtime/data.h"
#include "worker/runtime/data_files.h"
#include "worker/runtime/parameters.h"
#include "worker/runtime/seed.h"

namespace mapd {

// ---------------------------------------------------------------- parameters

absl::StatusOr<at::Tensor> InitTensor(const v1::InitRule& rule, const TensorType& type, uint64_t seed) {
  const std::vector<int64_t>& shape = type.shape;
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor t;
  std::string error;
  MAPD_RETURN_IF_ERROR(CatchTorch("init", [&] {
    switch (rule.kind()) {
      case v1::InitRule::ZEROS: t = at::zeros(shape, f32); break;
      case v1::InitRule::ONES: t = at::ones(shape, f32); break;
      case v1::InitRule::NORMAL: t = at::empty(shape, f32).normal_(rule.mean(), rule.std(), gen); break;
      case v1::InitRule::UNIFORM: t = at::empty(shape, f32).uniform_(rule.low(), rule.high(), gen); break;
      case v1::InitRule::KAIMING_UNIFORM: {
        if (rule.fan_in() <= 0) {
          error = absl::StrCat("KAIMING_UNIFORM needs a positive fan_in, got ", rule.fan_in());
          break;
        }
        const double bound = 1.0 / std::sqrt(static_cast<double>(rule.fan_in()));
        t = at::empty(shape, f32).uniform_(-bound, bound, gen);
        break;
      }
      case v1::InitRule::ROPE_COS:
      case v1::InitRule::ROPE_SIN: {
        if (shape.size() != 2 || shape[1] % 2 != 0 || rule.theta() <= 0) {
          error = absl::StrCat("RoPE tables need shape [seq, even head_dim] and theta > 0, got ", type.ToString(),
                               " theta=", rule.theta());
          break;
        }
        const int64_t seq = shape[0], d = shape[1];
        // As LLaMA's precompute: 1 / theta^(arange(0, d, 2) / d), outer with positions, twice.
        at::Tensor inv = at::reciprocal(at::pow(c10::Scalar(rule.theta()), at::arange(0, d, 2, f32) / d));
        at::Tensor freqs = at::outer(at::arange(seq, f32), inv);
        at::Tensor emb = at::cat({freqs, freqs}, -1);
        t = rule.kind() == v1::InitRule::ROPE_COS ? emb.cos() : emb.sin();
        break;
      }
      case v1::InitRule::CAUSAL_MASK:
        if (shape.size() < 2) {
          error = absl::StrCat("CAUSAL_MASK needs at least 2 dimensions, got ", type.ToString());
          break;
        }
        t = at::ones(shape, f32).tril();
        break;
      default:
        error = absl::StrCat("unknown init rule kind ", static_cast<int>(rule.kind()));
    }
    if (t.defined()) t = t.to(ToScalarType(type.dtype));
  }));
  if (!error.empty()) return absl::InvalidArgumentError(error);
  return t;
}

absl::StatusOr<at::Tensor> TensorFromData(const TensorData& data) {
  if (static_cast<int64_t>(data.bytes.size()) != data.type.NumBytes()) {
    return absl::DataLossError(absl::StrCat("data of ", data.type.ToString(), " has ", data.bytes.size(),
                                            " bytes, needs ", data.type.NumBytes()));
  }
  at::Tensor t = at::empty(data.type.shape, at::TensorOptions().dtype(ToScalarType(data.type.dtype)));
  if (!data.bytes.empty()) std::memcpy(t.data_ptr(), data.bytes.data(), data.bytes.size());
  return t;
}

v1::TensorData TensorToProto(const std::string& name, const at::Tensor& t) {
  v1::TensorData d;
  d.set_name(name);
  const at::Tensor c = t.detach().contiguous().cpu();
  d.mutable_type()->set_dtype(FromScalarType(c.scalar_type()));
  for (int64_t s : c.sizes()) d.mutable_type()->add_shape(s);
  d.set_data(std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
  return d;
}

absl::StatusOr<at::Tensor> TensorFromProto(const v1::TensorData& d) {
  const TensorType type = TensorType::FromProto(d.type());
  at::Tensor t = at::empty(type.shape, at::TensorOptions().dtype(ToScalarType(type.dtype)));
  if (static_cast<size_t>(t.nbytes()) != d.data().size()) {
    return absl::DataLossError(absl::StrCat("tensor '", d.name(), "' has ", d.data().size(), " bytes; ",
                                            type.ToString(), " needs ", t.nbytes()));
  }
  std::memcpy(t.data_ptr(), d.data().data(), d.data().size());
  return t;
}


absl::StatusOr<at::Tensor> MakeParameterTensor(const v1::Parameter& p, uint64_t seed) {
  if (p.has_init()) {
    auto made = InitTensor(p.init(), TensorType::FromProto(p.type()), DeriveSeed(seed, p.name()));
    if (!made.ok()) return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name(), "': ", made.status().message()));
    return *made;
  }
  if (p.has_data()) {
    MAPD_ASSIGN_OR_RETURN(TensorData data, LoadParameterData(p));
    MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromData(data));
    const at::ScalarType want = ToScalarType(p.type().dtype());
    return t.scalar_type() == want ? t : t.to(want);  // stored f32 data of a bf16 graph's parameter
  }
  return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name(), "' has neither an init rule nor data to make it from"));
}

absl::StatusOr<ParameterStore> ParameterStore::Create(const v1::Graph& graph, uint64_t seed, c10::Device device) {
  ArchiveScope archives;  // each archive loaded once for all its parameters
  ParameterStore store;
  for (const v1::Parameter& p : graph.parameters()) {
    // Making it allocates, and a memory cap may refuse that: a status, never an exception.
    absl::StatusOr<at::Tensor> made;
    MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("parameter '", p.name(), "'"), [&] { made = MakeParameterTensor(p, seed); }));
    if (!made.ok()) return made.status();
    at::Tensor t = *std::move(made);
    MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("parameter '", p.name(), "'"), [&] {
      if (t.device() != device) t = t.to(device);
      if (p.trainable()) t.set_requires_grad(true);
    }));
    store.names_.push_back(p.name());
    store.trainable_.push_back(p.trainable());
    store.tensors_[p.name()] = t;
    for (const std::string& alias : p.aliases()) store.canonical_[alias] = p.name();
  }
  return store;
}

const at::Tensor* ParameterStore::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    auto a = canonical_.find(name);
    if (a == canonical_.end()) return nullptr;
    it = tensors_.find(a->second);
  }
  return it == tensors_.end() ? nullptr : &it->second;
}

at::Tensor* ParameterStore::FindMutable(const std::string& name) {
  return const_cast<at::Tensor*>(static_cast<const ParameterStore*>(this)->Find(name));
}

std::vector<std::pair<std::string, at::Tensor>> ParameterStore::Trainable() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (trainable_[i]) out.emplace_back(names_[i], tensors_.at(names_[i]));
  }
  return out;
}

int64_t ParameterStore::NumBytes() const {
  int64_t n = 0;
  for (const auto& kv : tensors_) n += static_cast<int64_t>(kv.second.nbytes());
  return n;
}

// ---------------------------------------------------------------- data

absl::StatusOr<DataOptions::Source> ParseDataSource(const std::string& name) {
  if (name == "synthetic") return DataOptions::Source::kSynthetic;
  if (name == "text") return DataOptions::Source::kText;
  if (name == "tokens") return DataOptions::Source::kTokens;
  if (name == "npy") return DataOptions::Source::kNpy;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data source '", name, "'; use synthetic, text (a byte-level text file), tokens (uint16 ids) or npy (NumPy arrays)"));
}


namespace {

// The whole array as a tensor over the mapped file (no copy; read-only by convention).
at::Tensor ArrayTensor(const NpyArray& a) {
  return at::from_blob(const_cast<void*>(a.data()), a.shape(), at::TensorOptions().dtype(ToScalarType(a.dtype())));
}

class BatchSource : public DataSource {
 public:
  struct Feed {
    const v1::GraphInput* input;
    ValueRange range;  // integer inputs: their values
  };

  BatchSource(std::vector<Feed> feeds, c10::Device device, uint64_t seed)
      : feeds_(std::move(feeds)), device_(device), rng_(DeriveSeed(seed, "data")),
        gen_(at::make_generator<at::CPUGeneratorImpl>(DeriveSeed(seed, "data:tensors"))) {}

  // Windows over a token sequence for the tokens/targets inputs.
  void SetSequence(TokenSequence seq, const std::string& tokens, const std::string& targets) {
    seq_ = std::move(seq);
    tokens_ = tokens;
    targets_ = targets;
  }

  // Rows of arrays for graph inputs (the samples of an .npy file, and its targets).
  void AddArray(NpyArray array, const std::string& input) { arrays_.push_back({std::move(array), input}); }

  absl::StatusOr<TensorMap> Next() override {
    TensorMap batch;
    MAPD_RETURN_IF_ERROR(CatchTorch("making a batch", [&] {
      if (seq_) Windows(&batch);
      if (!arrays_.empty()) Rows(&batch);
      for (const Feed& f : feeds_) {
        const std::string& name = f.input->name();
        if (batch.count(name)) continue;
        const TensorType type = TensorType::FromProto(f.input->type());
        const at::ScalarType dtype = ToScalarType(type.dtype);
        at::Tensor t;
        if (type.dtype == v1::BOOL) {
          t = at::randint(0, 2, type.shape, gen_, at::TensorOptions().dtype(at::kLong)).to(at::kBool);
        } else if (IsIntegral(type.dtype)) {
          t = at::randint(f.range.low, f.range.high + 1, type.shape, gen_, at::TensorOptions().dtype(at::kLong)).to(dtype);
        } else {
          t = at::randn(type.shape, gen_, at::TensorOptions().dtype(at::kFloat)).to(dtype);
        }
        batch[name] = t;
      }
      for (auto& kv : batch) {
        if (kv.second.device() != device_) kv.second = kv.second.to(device_);
      }
    }));
    return batch;
  }

 private:
  void Windows(TensorMap* batch) {
    const TensorType type = TensorType::FromProto(FindInput(tokens_)->type());
    const int64_t rows = type.shape[0], len = type.shape[1];
    at::Tensor x = at::empty({rows, len}, at::TensorOptions().dtype(at::kLong));
    at::Tensor y = at::empty({rows, len}, at::TensorOptions().dtype(at::kLong));
    int64_t* xp = x.data_ptr<int64_t>();
    int64_t* yp = y.data_ptr<int64_t>();
    const uint64_t starts = seq_->size() - static_cast<uint64_t>(len);  // windows of len + 1 tokens
    for (int64_t r = 0; r < rows; ++r) {
      const size_t off = static_cast<size_t>(rng_.Below(starts));
      for (int64_t i = 0; i < len; ++i) {
        xp[r * len + i] = seq_->at(off + i);
        yp[r * len + i] = seq_->at(off + i + 1);
      }
    }
    (*batch)[tokens_] = x.to(ToScalarType(type.dtype));
    if (!targets_.empty()) {
      (*batch)[targets_] = y.to(ToScalarType(TensorType::FromProto(FindInput(targets_)->type()).dtype));
    }
  }

  // B samples, the next of this epoch's permutation of the arrays' N (a new one when it runs out).
  void Rows(TensorMap* batch) {
    const int64_t rows = TensorType::FromProto(FindInput(arrays_[0].input)->type()).shape[0];
    const uint64_t n = static_cast<uint64_t>(arrays_[0].array.shape()[0]);
    at::Tensor index = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
    int64_t* ip = index.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      if (next_in_epoch_ == order_.size()) {  // Fisher-Yates over 0..n-1
        order_.resize(n);
        for (uint64_t i = 0; i < n; ++i) order_[i] = i;
        for (uint64_t i = n; i > 1; --i) std::swap(order_[i - 1], order_[rng_.Below(i)]);
        next_in_epoch_ = 0;
      }
      ip[r] = static_cast<int64_t>(order_[next_in_epoch_++]);
    }
    for (const Array& a : arrays_) {
      const TensorType type = TensorType::FromProto(FindInput(a.input)->type());
      (*batch)[a.input] = ArrayTensor(a.array).index_select(0, index).to(ToScalarType(type.dtype));
    }
  }

  const v1::GraphInput* FindInput(const std::string& name) const {
    for (const Feed& f : feeds_) {
      if (f.input->name() == name) return f.input;
    }
    return nullptr;
  }

  std::vector<Feed> feeds_;
  c10::Device device_;
  SplitMix64 rng_;
  at::Generator gen_;
  std::optional<TokenSequence> seq_;
  std::string tokens_, targets_;
  struct Array {
    NpyArray array;
    std::string input;
  };
  std::vector<Array> arrays_;
  std::vector<uint64_t> order_;  // this epoch's order of the arrays' samples
  size_t next_in_epoch_ = 0;
};

// INVALID_ARGUMENT unless `a` holds samples of graph input `in`: the same shape past the batch
// dimension, at least one sample, and for an integer input integer values in its range.
absl::Status CheckArrayFeeds(const NpyArray& a, const v1::GraphInput& in, const ValueRange& range) {
  const TensorType want = TensorType::FromProto(in.type());
  const std::string shape = absl::StrCat("[", absl::StrJoin(a.shape(), ", "), "]");
  if (want.rank() < 1 || static_cast<int>(a.shape().size()) != want.rank() ||
      !std::equal(want.shape.begin() + 1, want.shape.end(), a.shape().begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat("array '", a.path(), "' has shape ", shape, "; input '", in.name(), "' is ",
                                                   want.ToString(), ": save its samples as [N", want.rank() < 1 ? "" : ", ",
                                                   absl::StrJoin(want.shape.begin() + std::min(1, want.rank()), want.shape.end(), ", "), "]"));
  }
  if (a.shape()[0] < 1) return absl::InvalidArgumentError(absl::StrCat("array '", a.path(), "' holds no samples"));
  if (!IsIntegral(want.dtype) && want.dtype != v1::BOOL) return absl::OkStatus();
  if (IsFloating(a.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("array '", a.path(), "' holds floats; input '", in.name(), "' is ",
                                                   want.ToString(), ": save integers (e.g. astype('int64'))"));
  }
  if (want.dtype == v1::BOOL) return absl::OkStatus();
  int64_t lo = 0, hi = 0;
  MAPD_RETURN_IF_ERROR(CatchTorch("reading an array", [&] {
    const at::Tensor t = ArrayTensor(a).to(at::kLong);
    lo = t.min().item<int64_t>();
    hi = t.max().item<int64_t>();
  }));
  if (lo < range.low || hi > range.high) {
    return absl::InvalidArgumentError(absl::StrCat("array '", a.path(), "' holds values in [", lo, ", ", hi, "]; input '",
                                                   in.name(), "' takes ", range.low, "..", range.high,
                                                   in.has_value_range() ? " (its stated range)" : " (the graph's classes or rows it indexes)"));
  }
  return absl::OkStatus();
}

// npy:INPUTS[,TARGETS]: the graph's first input (and second) from arrays of as many samples.
absl::Status FeedArrays(const v1::Graph& graph, const DataOptions& options, const std::vector<BatchSource::Feed>& feeds,
                        BatchSource& source) {
  const int wanted = options.targets_path.empty() ? 1 : 2;
  if (graph.inputs_size() < wanted) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' has ", graph.inputs_size(), " input(s); npy:",
                                                   wanted == 2 ? "INPUTS,TARGETS feeds its first two" : "INPUTS feeds its first"));
  }
  int64_t samples = -1;
  std::string first;
  for (int i = 0; i < wanted; ++i) {
    const std::string& path = i == 0 ? options.path : options.targets_path;
    MAPD_ASSIGN_OR_RETURN(NpyArray a, NpyArray::Open(path));
    MAPD_RETURN_IF_ERROR(CheckArrayFeeds(a, graph.inputs(i), feeds[i].range));
    if (samples >= 0 && a.shape()[0] != samples) {
      return absl::InvalidArgumentError(absl::StrCat("array '", path, "' has ", a.shape()[0], " samples and '", first, "' has ",
                                                     samples, "; give inputs and targets of as many samples"));
    }
    samples = a.shape()[0];
    first = path;
    source.AddArray(std::move(a), graph.inputs(i).name());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataSource>> MakeDataSource(const v1::Graph& graph, const DataOptions& options,
                                                           c10::Device device) {
  std::vector<BatchSource::Feed> feeds;
  const v1::GraphInput* tokens = nullptr;
  const v1::GraphInput* targets = nullptr;
  for (const v1::GraphInput& in : graph.inputs()) {
    BatchSource::Feed f{&in, {}};
    const DType dtype = in.type().dtype();
    if (IsIntegral(dtype)) {
      MAPD_ASSIGN_OR_RETURN(f.range, InputRange(graph, in.name()));
    }
    if (in.role() == "tokens") tokens = &in;
    if (in.role() == "targets") targets = &in;
    feeds.push_back(f);
  }
  auto source = std::make_unique<BatchSource>(feeds, device, options.seed);
  if (options.source == DataOptions::Source::kSynthetic) return std::unique_ptr<DataSource>(std::move(source));
  if (options.source == DataOptions::Source::kNpy) {
    MAPD_RETURN_IF_ERROR(FeedArrays(graph, options, feeds, *source));
    return std::unique_ptr<DataSource>(std::move(source));
  }

  const bool text = options.source == DataOptions::Source::kText;
  const char* what = text ? "text file" : "token file";
  if (tokens == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph '", graph.name(), "' has no input of role 'tokens'; a ", what,
        " feeds a language model with inputs 'tokens' and 'targets' of shape [batch, seq]"));
  }
  const TensorType tt = TensorType::FromProto(tokens->type());
  if (tt.rank() != 2 || !IsIntegral(tt.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", tokens->name(), "' is ", tt.ToString(), "; a ", what,
                                                   " needs integer tokens of shape [batch, seq]"));
  }
  if (targets != nullptr && TensorType::FromProto(targets->type()).shape != tt.shape) {
    return absl::InvalidArgumentError(absl::StrCat("targets ", TensorType::FromProto(targets->type()).ToString(),
                                                   " and tokens ", tt.ToString(), " differ in shape"));
  }
  int64_t vocab = 0;
  MAPD_ASSIGN_OR_RETURN(vocab, IndexBound(graph, tokens->name()));
  if (targets != nullptr) {
    MAPD_ASSIGN_OR_RETURN(int64_t tv, IndexBound(graph, targets->name()));
    vocab = std::min(vocab, tv);
  }
  std::optional<TokenSequence> seq;
  if (text) {
    MAPD_ASSIGN_OR_RETURN(seq, TokenSequence::Text(options.path));
    if (vocab < 256) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' has a vocabulary of ", vocab,
                                                     "; byte-level text needs at least 256"));
    }
  } else {
    MAPD_ASSIGN_OR_RETURN(seq, TokenSequence::Uint16(options.path));
  }
  const int64_t len = tt.shape[1];
  if (static_cast<int64_t>(seq->size()) < len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", options.path, "' has ", seq->size(),
                                                   " tokens; a training window needs seq+1 = ", len + 1));
  }
  if (!text) {
    const int64_t max_id = seq->MaxId();
    if (max_id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token file '", options.path, "' holds id ", max_id,
                                                     ", not below the graph's vocabulary of ", vocab));
    }
  }
  source->SetSequence(std::move(*seq), tokens->name(), targets == nullptr ? "" : targets->name());
  return std::unique_ptr<DataSource>(std::move(source));
}

}  // namespace mapd
