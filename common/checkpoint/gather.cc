#include "common/checkpoint/gather.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_commit.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace mapd {

namespace {

int64_t NumElements(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One whole tensor being filled from its pieces.
class WholeTensor {
 public:
  // Copies `piece` into its place; a piece already copied (a replica's) is skipped.
  absl::Status Add(const v1::TensorData& piece) {
    const v1::BlockPlace& place = piece.place();
    const std::string where = absl::StrCat("'", piece.name(), "'");
    if (place.global_shape_size() == 0 && place.block_shape_size() == 0 && piece.type().shape_size() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint's block of ", where, " does not say where it sits in the whole tensor (a checkpoint written before "
          "blocks were placed); train on from it once with this MAP and export the new step"));
    }
    const int64_t n = NumElements(piece.type().shape());
    if (n <= 0) return absl::OkStatus();
    if (piece.data().size() % n != 0) return absl::DataLossError(absl::StrCat("the block of ", where, " has a size its type does not divide"));
    const size_t item = piece.data().size() / n;
    if (tensor_.name().empty()) {
      tensor_.set_name(piece.name());
      tensor_.mutable_type()->set_dtype(piece.type().dtype());
      *tensor_.mutable_type()->mutable_shape() = place.global_shape();
      *tensor_.mutable_place()->mutable_aliases() = place.aliases();
      tensor_.mutable_place()->set_kind(place.kind());
      tensor_.mutable_data()->assign(NumElements(place.global_shape()) * item, '\0');
      item_ = item;
    }
    if (tensor_.type().dtype() != piece.type().dtype() || item != item_ ||
        !std::equal(place.global_shape().begin(), place.global_shape().end(), tensor_.type().shape().begin(),
                    tensor_.type().shape().end())) {
      return absl::DataLossError(absl::StrCat("the ranks' blocks of ", where, " disagree on its whole shape or type"));
    }
    std::vector<int64_t> key(place.start().begin(), place.start().end());
    key.push_back(place.flat_shard() ? place.flat_start() : -1);
    if (!seen_.insert(key).second) return absl::OkStatus();
    return Copy(piece, n);
  }

  // FAILED_PRECONDITION unless every element came from some block.
  absl::Status CheckCovered() const {
    const int64_t whole = NumElements(tensor_.type().shape());
    if (covered_ == whole) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("the checkpoint's blocks of '", tensor_.name(), "' cover ", covered_, " of its ",
                                                      whole, " elements"));
  }
  v1::TensorData Take() { return std::move(tensor_); }

 private:
  // Row by row of the block: runs along its last dimension are contiguous in the whole.
  absl::Status Copy(const v1::TensorData& piece, int64_t n) {
    const v1::BlockPlace& place = piece.place();
    const auto& g = tensor_.type().shape();
    const int rank = g.size();
    std::vector<int64_t> block(place.block_shape().begin(), place.block_shape().end());
    if (block.empty() && rank > 0) block.assign(piece.type().shape().begin(), piece.type().shape().end());
    std::vector<int64_t> start(place.start().begin(), place.start().end());
    if (start.empty()) start.assign(rank, 0);
    if (static_cast<int>(block.size()) != rank || static_cast<int>(start.size()) != rank) {
      return absl::DataLossError(absl::StrCat("the block of '", piece.name(), "' has a place of another rank than its tensor"));
    }
    int64_t block_numel = 1;
    for (int d = 0; d < rank; ++d) {
      if (start[d] < 0 || block[d] < 0 || start[d] + block[d] > g[d]) {
        return absl::DataLossError(absl::StrCat("the block of '", piece.name(), "' does not fit in its whole tensor"));
      }
      block_numel *= block[d];
    }
    const int64_t first = place.flat_shard() ? place.flat_start() : 0;
    const int64_t last = std::min(first + n, block_numel);  // a ZeRO shard's padding is past the block
    if (!place.flat_shard() && n != block_numel) {
      return absl::DataLossError(absl::StrCat("the block of '", piece.name(), "' holds ", n, " elements; its place says ", block_numel));
    }
    std::vector<int64_t> stride(rank, 1);
    for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * g[d + 1];
    const int64_t row = rank == 0 ? 1 : block.back();
    const char* src = piece.data().data();
    char* dst = tensor_.mutable_data()->data();
    for (int64_t k = first; k < last;) {
      const int64_t r = k / row, col = k % row, run = std::min(row - col, last - k);
      int64_t offset = 0, rest = r;
      for (int d = rank - 2; d >= 0; --d) {
        offset += (start[d] + rest % block[d]) * stride[d];
        rest /= block[d];
      }
      if (rank > 0) offset += start[rank - 1] + col;
      std::memcpy(dst + offset * item_, src + (k - first) * item_, run * item_);
      k += run;
    }
    covered_ += std::max<int64_t>(0, last - first);
    return absl::OkStatus();
  }

  v1::TensorData tensor_;
  size_t item_ = 0;
  int64_t covered_ = 0;
  std::set<std::vector<int64_t>> seen_;
};

// Whole tensors by name, in the order their names first came.
class WholeTensors {
 public:
  absl::Status Add(const v1::TensorData& piece) {
    auto [it, fresh] = index_.emplace(piece.name(), tensors_.size());
    if (fresh) tensors_.emplace_back();
    return tensors_[it->second].Add(piece);
  }
  bool Has(const std::string& name) const { return index_.count(name) > 0; }
  absl::StatusOr<v1::TensorData> Take(const std::string& name) {
    WholeTensor& t = tensors_[index_.at(name)];
    MAPD_RETURN_IF_ERROR(t.CheckCovered());
    return t.Take();
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names(index_.size());
    for (const auto& [name, i] : index_) names[i] = name;
    return names;
  }

 private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<WholeTensor> tensors_;
};

// The step every directory committed (`step`, or the smallest LATEST) and its metadata.
absl::StatusOr<v1::CheckpointMeta> CommonStep(const std::vector<std::string>& dirs, int64_t step) {
  if (dirs.empty()) return absl::InvalidArgumentError("give at least one checkpoint directory");
  if (step <= 0) {
    step = INT64_MAX;
    for (const std::string& dir : dirs) {
      MAPD_ASSIGN_OR_RETURN(v1::CheckpointMeta latest, ReadLatestCheckpoint(dir));
      step = std::min(step, latest.step());
    }
  }
  v1::CheckpointMeta meta;
  for (const std::string& dir : dirs) {
    const std::string file = CheckpointStepDir(dir, step) + "/meta.pb";
    auto bytes = ReadFileToString(file);
    if (!bytes.ok()) return absl::NotFoundError(absl::StrCat("step ", step, " is not committed in ", dir, " (no ", file, ")"));
    v1::CheckpointMeta m;
    if (!m.ParseFromString(*bytes) || m.step() != step) return absl::DataLossError(absl::StrCat(file, " does not parse"));
    if (dir != dirs.front() && (m.ranks() != meta.ranks() || m.plan() != meta.plan())) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " and ", dirs.front(), " hold step ", step, " of different runs"));
    }
    meta = m;
  }
  return meta;
}

}  // namespace

absl::StatusOr<GatheredCheckpoint> GatherCheckpoint(const std::vector<std::string>& dirs, int64_t step) {
  GatheredCheckpoint out;
  MAPD_ASSIGN_OR_RETURN(out.meta, CommonStep(dirs, step));
  WholeTensors parameters;
  std::map<std::string, WholeTensors> states;  // "buf1", "buf2", "master"
  std::map<std::string, int64_t> slot_steps;
  std::vector<std::string> slot_order;
  std::vector<int> missing;
  for (int r = 0; r < out.meta.ranks(); ++r) {
    std::string found;
    for (const std::string& dir : dirs) {
      const std::string file = absl::StrCat(CheckpointStepDir(dir, out.meta.step()), "/rank_", r, ".pb");
      if (std::filesystem::exists(file)) {
        found = file;
        break;
      }
    }
    if (found.empty()) {
      missing.push_back(r);
      continue;
    }
    MAPD_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(found));
    v1::RankCheckpoint c;
    if (!c.ParseFromString(bytes)) return absl::DataLossError(absl::StrCat(found, " does not parse"));
    for (const v1::TensorData& d : c.parameters()) MAPD_RETURN_IF_ERROR(parameters.Add(d));
    for (const v1::OptimizerSlot& s : c.optimizer()) {
      if (slot_steps.emplace(s.name(), s.steps()).second) slot_order.push_back(s.name());
      if (s.has_buf1()) MAPD_RETURN_IF_ERROR(states["buf1"].Add(s.buf1()));
      if (s.has_buf2()) MAPD_RETURN_IF_ERROR(states["buf2"].Add(s.buf2()));
      if (s.has_master()) MAPD_RETURN_IF_ERROR(states["master"].Add(s.master()));
    }
    out.whole.set_optimizer_steps(c.optimizer_steps());
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no directory given holds rank(s) ", absl::StrJoin(missing, ", "), " of step ",
                                                      out.meta.step(), " (", out.meta.ranks(),
                                                      " ranks): give the checkpoint directory of every worker the job ran on"));
  }
  out.whole.set_step(out.meta.step());
  out.whole.set_rank(-1);
  for (const std::string& name : parameters.Names()) {
    MAPD_ASSIGN_OR_RETURN(*out.whole.add_parameters(), parameters.Take(name));
  }
  for (const std::string& name : slot_order) {
    v1::OptimizerSlot* slot = out.whole.add_optimizer();
    slot->set_name(name);
    slot->set_steps(slot_steps[name]);
    if (states["buf1"].Has(name)) {
      MAPD_ASSIGN_OR_RETURN(*slot->mutable_buf1(), states["buf1"].Take(name));
    }
    if (states["buf2"].Has(name)) {
      MAPD_ASSIGN_OR_RETURN(*slot->mutable_buf2(), states["buf2"].Take(name));
    }
    if (states["master"].Has(name)) {
      MAPD_ASSIGN_OR_RETURN(*slot->mutable_master(), states["master"].Take(name));
    }
  }
  return out;
}

}  // namespace mapd
