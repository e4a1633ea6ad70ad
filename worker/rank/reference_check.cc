#include "worker/rank/reference_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/ir/dtype.h"

namespace mapd {

namespace {

// A tensor's values, row-major, as doubles (its raw little-endian bytes decoded by dtype), and
// its shape. No LibTorch: the check reads what ranks and one device wrote.
struct Values {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

double HalfToDouble(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);                       // subnormal
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -v : v;
}

template <typename T>
double Read(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}

absl::StatusOr<Values> Decode(const v1::TensorData& d) {
  Values out;
  out.shape.assign(d.type().shape().begin(), d.type().shape().end());
  int64_t n = 1;
  for (int64_t s : out.shape) n *= s;
  const v1::DType dtype = d.type().dtype();
  const int64_t size = DTypeSize(dtype);
  if (size <= 0 || static_cast<int64_t>(d.data().size()) != n * size) {
    return absl::DataLossError(absl::StrCat("tensor '", d.name(), "' has ", d.data().size(), " bytes; [", absl::StrJoin(out.shape, ","),
                                            "] of ", v1::DType_Name(dtype), " needs ", n * size));
  }
  out.data.resize(n);
  const char* p = d.data().data();
  for (int64_t i = 0; i < n; ++i, p += size) {
    switch (dtype) {
      case v1::FLOAT32: out.data[i] = Read<float>(p); break;
      case v1::FLOAT64: out.data[i] = Read<double>(p); break;
      case v1::BFLOAT16: {
        const uint32_t bits = static_cast<uint32_t>(static_cast<uint16_t>(Read<uint16_t>(p))) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out.data[i] = f;
        break;
      }
      case v1::FLOAT16: out.data[i] = HalfToDouble(static_cast<uint16_t>(Read<uint16_t>(p))); break;
      case v1::INT64: out.data[i] = Read<int64_t>(p); break;
      case v1::INT32: out.data[i] = Read<int32_t>(p); break;
      case v1::INT16: out.data[i] = Read<int16_t>(p); break;
      case v1::INT8: out.data[i] = Read<int8_t>(p); break;
      case v1::UINT8: case v1::BOOL: out.data[i] = Read<uint8_t>(p); break;
      default: return absl::InvalidArgumentError(absl::StrCat("tensor '", d.name(), "' has no dtype"));
    }
  }
  return out;
}

std::string Describe(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

struct WindowResult {
  double relative = 0;        // max |block − window| / max(1, max |window|) over the strict elements
  double noise_absolute = 0;  // max |block − window| over the noise-driven ones
  int64_t noise_elements = 0;
};

// The block against want's window at `start`, walking the block row-major. `noise_floor`: a
// second moment below it marks a noise-driven element (`second_moment` null: none is).
WindowResult WindowDifference(const Values& block, const Values& want, const std::vector<int64_t>& start,
                              const Values* second_moment, double noise_floor) {
  const size_t rank = block.shape.size();
  std::vector<int64_t> index(rank, 0);
  WindowResult r;
  double diff = 0, scale = 1;
  for (size_t i = 0; i < block.data.size(); ++i) {
    int64_t at = 0;
    for (size_t k = 0; k < rank; ++k) at = at * want.shape[k] + start[k] + index[k];
    scale = std::max(scale, std::abs(want.data[at]));
    const double d = std::abs(block.data[i] - want.data[at]);
    if (second_moment != nullptr && second_moment->data[at] < noise_floor) {
      r.noise_absolute = std::max(r.noise_absolute, d);
      ++r.noise_elements;
    } else {
      diff = std::max(diff, d);
    }
    for (size_t k = rank; k-- > 0;) {  // the next index, last dimension fastest
      if (++index[k] < block.shape[k]) break;
      index[k] = 0;
    }
  }
  r.relative = diff / scale;
  return r;
}

double MaxOf(const Values& v) {
  double m = 0;
  for (double x : v.data) m = std::max(m, x);
  return m;
}

}  // namespace

absl::Status NoiseModel::Validate() const {
  if (!(tensor_ratio >= 0 && tensor_ratio < 1) || !(model_ratio >= 0 && model_ratio < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("noise ratios must be in [0, 1), got ", tensor_ratio, " and ", model_ratio));
  }
  if (!(tolerance >= 0)) return absl::InvalidArgumentError(absl::StrCat("the noise tolerance must not be negative, got ", tolerance));
  return absl::OkStatus();
}

absl::StatusOr<BlockDifference> WorstBlockDifference(const std::vector<v1::RankProgram>& programs,
                                                     const std::vector<v1::RankCheckpoint>& finals,
                                                     const std::vector<v1::TensorData>& reference, const NoiseModel* noise) {
  if (programs.size() != finals.size()) {
    return absl::InvalidArgumentError(absl::StrCat(programs.size(), " programs but ", finals.size(), " ranks' final blocks"));
  }
  std::unordered_map<std::string, Values> one_device;
  for (const v1::TensorData& d : reference) {
    auto v = Decode(d);
    if (!v.ok()) return v.status();
    one_device[d.name()] = *std::move(v);
  }
  // Each noise-driven tensor's floor: the larger of its ratio of the tensor's and of the model's
  // largest second moment.
  std::unordered_map<std::string, std::pair<Values, double>> moments;
  if (noise != nullptr) {
    if (auto st = noise->Validate(); !st.ok()) return st;
    double model_max = 0;
    for (const v1::TensorData& d : noise->second_moments) {
      auto v = Decode(d);
      if (!v.ok()) return v.status();
      auto param = one_device.find(d.name());
      if (param == one_device.end() || param->second.shape != v->shape) {
        return absl::InvalidArgumentError(absl::StrCat("the second moment of '", d.name(), "' (", Describe(v->shape),
                                                       ") has no parameter of its shape"));
      }
      const double m = MaxOf(*v);
      model_max = std::max(model_max, m);
      moments[d.name()] = {*std::move(v), m};
    }
    for (auto& [name, entry] : moments) {
      entry.second = std::max(noise->tensor_ratio * entry.second, noise->model_ratio * model_max);
    }
  }
  BlockDifference worst;
  for (size_t r = 0; r < programs.size(); ++r) {
    std::unordered_map<std::string, const v1::Shard*> shards;
    for (const v1::Shard& s : programs[r].parameters()) shards[s.name()] = &s;
    for (const v1::RankProgram& chunk : programs[r].later_chunks()) {  // interleaved: the rank's other chunks
      for (const v1::Shard& s : chunk.parameters()) shards[s.name()] = &s;
    }
    for (const v1::TensorData& d : finals[r].parameters()) {
      auto shard = shards.find(d.name());
      auto expected = one_device.find(d.name());
      if (shard == shards.end() || expected == one_device.end()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s final block of '", d.name(), "' has no ",
                                                       shard == shards.end() ? "place in its program" : "single-device tensor"));
      }
      auto block = Decode(d);
      if (!block.ok()) return block.status();
      const Values& want = expected->second;
      const std::vector<int64_t> start(shard->second->offsets().start().begin(), shard->second->offsets().start().end());
      if (want.shape.size() != block->shape.size() || start.size() != block->shape.size()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s block of '", d.name(), "' is ", Describe(block->shape),
                                                       "; one device's tensor is ", Describe(want.shape)));
      }
      for (size_t k = 0; k < block->shape.size(); ++k) {
        if (start[k] < 0 || start[k] + block->shape[k] > want.shape[k]) {
          return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s block of '", d.name(), "' (", Describe(block->shape),
                                                         ") does not fit one device's ", Describe(want.shape)));
        }
      }
      if (block->data.empty()) continue;
      auto moment = moments.find(d.name());
      const WindowResult diff = moment == moments.end() ? WindowDifference(*block, want, start, nullptr, 0)
                                                        : WindowDifference(*block, want, start, &moment->second.first,
                                                                           moment->second.second);
      ++worst.blocks;
      if (worst.parameter.empty() || diff.relative > worst.relative) {
        worst.relative = diff.relative;
        worst.parameter = d.name();
        worst.rank = static_cast<int>(r);
      }
      worst.noise_elements += diff.noise_elements;
      if (diff.noise_elements > 0 && (worst.noise_parameter.empty() || diff.noise_absolute > worst.noise_difference)) {
        worst.noise_difference = diff.noise_absolute;
        worst.noise_parameter = d.name();
      }
    }
  }
  return worst;
}

}  // namespace mapd
