#include "worker/runtime/state_dict_file.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "model/ir/tensor_type.h"
#include "worker/runtime/torch_pickle.h"
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

namespace {

// INVALID_ARGUMENT unless `path` begins as a zip does (torch.save's format since PyTorch 1.6).
absl::Status CheckIsZip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  char magic[4] = {};
  f.read(magic, 4);
  if (f.gcount() == 4 && std::string(magic, 4) == std::string("PK\3\4", 4)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a torch.save file (a zip archive); save the state dict with "
                                                 "torch.save(model.state_dict(), path) from PyTorch 1.6 or later"));
}

}  // namespace

absl::StatusOr<std::vector<v1::TensorData>> ReadStateDict(const std::string& path) {
  MAPD_RETURN_IF_ERROR(CheckIsZip(path));
  std::vector<v1::TensorData> out;
  absl::Status content = absl::OkStatus();
  MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("reading '", path, "'"), [&] {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("data.pkl") || reader.hasRecord("constants.pkl")) {
      content = absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' ", reader.hasRecord("constants.pkl") ? "is a TorchScript archive (give it as MODEL)" : "holds no data.pkl",
          ", not a state dict; save one with torch.save(model.state_dict(), path)"));
      return;
    }
    auto [pickle, size] = reader.getRecord("data.pkl");
    auto tensors = ParseStateDictPickle(absl::string_view(static_cast<const char*>(pickle.get()), size));
    if (!tensors.ok()) {
      content = absl::InvalidArgumentError(absl::StrCat("'", path, "': ", tensors.status().message()));
      return;
    }
    std::map<std::string, at::Tensor> storages;
    for (const PickledTensor& p : *tensors) {
      const at::ScalarType dtype = ToScalarType(p.dtype);
      at::Tensor& storage = storages[p.storage_key];
      if (!storage.defined()) {
        auto [data, bytes] = reader.getRecord("data/" + p.storage_key);
        const size_t item = at::elementSize(dtype);
        storage = at::empty({static_cast<int64_t>(bytes / item)}, at::TensorOptions().dtype(dtype));
        std::memcpy(storage.data_ptr(), data.get(), bytes / item * item);
      }
      out.push_back(TensorToProto(p.name, storage.as_strided(p.shape, p.stride, p.storage_offset)));
    }
  }));
  if (!content.ok()) return content;
  return out;
}

absl::Status SetInitialWeights(const std::vector<v1::TensorData>& state, v1::Graph& graph) {
  std::map<std::string, const v1::TensorData*> by_name;
  for (const v1::TensorData& t : state) by_name[t.name()] = &t;
  std::set<std::string> used;
  std::vector<std::string> missing, misshaped;
  for (v1::Parameter& p : *graph.mutable_parameters()) {
    if (p.kind() == v1::Parameter::CONSTANT) continue;
    const v1::TensorData* found = nullptr;
    std::vector<std::string> names = {p.name()};
    names.insert(names.end(), p.aliases().begin(), p.aliases().end());
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      used.insert(name);
      if (found == nullptr) found = it->second;
    }
    if (found == nullptr) {
      // A buffer the trace carries its values for keeps them: module.state_dict() leaves out
      // non-persistent buffers (RoPE tables, causal masks), which load_state_dict does not ask for.
      if (!(p.kind() == v1::Parameter::BUFFER && p.has_data())) missing.push_back(p.name());
      continue;
    }
    const TensorType want = TensorType::FromProto(p.type()), got = TensorType::FromProto(found->type());
    if (want.shape != got.shape) {
      misshaped.push_back(absl::StrCat("'", found->name(), "' is ", got.ToString(), ", the model's ", want.ToString()));
      continue;
    }
    MAPD_ASSIGN_OR_RETURN(at::Tensor t, TensorFromProto(*found));
    MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("converting '", found->name(), "'"), [&] {
      t = t.to(ToScalarType(want.dtype)).contiguous();
      p.mutable_data()->set_inline_data(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
    }));
  }
  std::vector<std::string> unexpected;
  for (const v1::TensorData& t : state) {
    if (!used.count(t.name()) && !absl::EndsWith(t.name(), ".num_batches_tracked")) unexpected.push_back(t.name());
  }
  if (missing.empty() && misshaped.empty() && unexpected.empty()) return absl::OkStatus();
  auto first = [](const std::vector<std::string>& v) {
    std::vector<std::string> shown(v.begin(), v.begin() + std::min<size_t>(v.size(), 5));
    return absl::StrCat(absl::StrJoin(shown, ", "), v.size() > 5 ? absl::StrCat(" and ", v.size() - 5, " more") : "");
  };
  std::vector<std::string> parts;
  if (!missing.empty()) parts.push_back(absl::StrCat("missing: ", first(missing)));
  if (!misshaped.empty()) parts.push_back(absl::StrCat("other shapes: ", first(misshaped)));
  if (!unexpected.empty()) parts.push_back(absl::StrCat("not in the model: ", first(unexpected)));
  return absl::InvalidArgumentError(absl::StrCat("the state dict does not fit model '", graph.name(), "' (", absl::StrJoin(parts, "; "),
                                                 "): give the state dict of this model (module.state_dict()), whose names "
                                                 "`mapctl inspect MODEL -o json` lists"));
}

}  // namespace mapd
