#include "worker/runtime/state_dict_file.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "worker/runtime/parameters.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

namespace {

using NamedValues = c10::impl::GenericDict;

NamedValues NewDict() { return NamedValues(c10::StringType::get(), c10::AnyType::get()); }

absl::StatusOr<NamedValues> ModelDict(const v1::RankCheckpoint& whole) {
  NamedValues model = NewDict();
  for (const v1::TensorData& d : whole.parameters()) {
    if (d.place().kind() == v1::Parameter::CONSTANT) continue;  // the trace's, not the module's
    MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromProto(d));
    model.insert(d.name(), t);
    for (const std::string& alias : d.place().aliases()) model.insert(alias, t);
  }
  return model;
}

// MAP's optimizers keep one buffer (SGD's momentum) or two (AdamW's moments).
absl::StatusOr<NamedValues> OptimizerDict(const v1::RankCheckpoint& whole) {
  NamedValues state = NewDict();
  for (const v1::OptimizerSlot& s : whole.optimizer()) {
    NamedValues slot = NewDict();
    const bool adamw = s.has_buf2();
    if (adamw) slot.insert("step", s.steps());
    if (s.has_buf1()) {
      MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromProto(s.buf1()));
      slot.insert(adamw ? "exp_avg" : "momentum_buffer", t);
    }
    if (adamw) {
      MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromProto(s.buf2()));
      slot.insert("exp_avg_sq", t);
    }
    if (s.has_master()) {
      MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromProto(s.master()));
      slot.insert("master", t);
    }
    state.insert(s.name(), slot);
  }
  NamedValues optimizer = NewDict();
  optimizer.insert("steps", whole.optimizer_steps());
  optimizer.insert("state", state);
  return optimizer;
}

}  // namespace

absl::Status WriteStateDict(const std::string& path, const v1::RankCheckpoint& whole, bool optimizer_state) {
  MAPD_ASSIGN_OR_RETURN(NamedValues model, ModelDict(whole));
  c10::IValue top = model;
  if (optimizer_state) {
    NamedValues both = NewDict();
    both.insert("model", model);
    MAPD_ASSIGN_OR_RETURN(NamedValues optimizer, OptimizerDict(whole));
    both.insert("optimizer", optimizer);
    top = both;
  }
  std::vector<char> bytes;
  MAPD_RETURN_IF_ERROR(CatchTorch("writing a state dict", [&] { bytes = torch::jit::pickle_save(top); }));
  return WriteStringToFileAtomic(path, std::string(bytes.data(), bytes.size()));
}

}  // namespace mapd
