#include "worker/runtime/executor.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/graph/verifier.h"
#include "worker/runtime/blas_threads.h"

namespace mapd {

absl::StatusOr<c10::Device> ParseDevice(const std::string& text) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(text);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", text, "'; use cpu, cuda or cuda:N"));
  }
  if (device.is_cpu()) return device;
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat("device '", text, "' is not supported; use cpu, cuda or cuda:N"));
  }
  if (!at::hasCUDA()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device '", text, "' asked for, but this LibTorch has no CUDA support or sees no GPU; use --device cpu, or "
        "a LibTorch built with CUDA on a machine with a GPU"));
  }
  const int64_t gpus = at::getNumGPUs();
  if (device.has_index() && device.index() >= gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("device '", text, "' asked for, but only ", gpus, " GPU(s) are visible"));
  }
  if (!device.has_index()) device = c10::Device(c10::kCUDA, 0);
  return device;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(v1::Graph proto, const ExecutorOptions& options) {
  MAPD_ASSIGN_OR_RETURN(c10::Device device, ParseDevice(options.device));
  MAPD_ASSIGN_OR_RETURN(Graph graph, MakeVerifiedGraph(std::move(proto)));
  std::vector<std::string> missing;
  for (const v1::Node& n : graph.proto().nodes()) {
    if (ExecTable::Global().Find(n.op()) == nullptr) missing.push_back(n.op());
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' uses ops the runtime cannot execute: ",
                                                   absl::StrJoin(missing, ", ")));
  }
  MAPD_ASSIGN_OR_RETURN(ParameterStore params, ParameterStore::Create(graph.proto(), options.seed, device));
  SetBlasThreads(at::get_num_threads());  // matrix products on as many threads as the rest
  std::unique_ptr<Executor> ex(new Executor(std::move(graph), std::move(params), device));
  MAPD_RETURN_IF_ERROR(ex->Plan());
  return ex;
}

// Gives every value a slot, resolves each node's inputs to slots, and computes where each
// value is read last so Run can release it there.
absl::Status Executor::Plan() {
  const v1::Graph& g = graph_.proto();
  std::unordered_map<std::string, int> slot;
  auto define = [&](const std::string& name) {
    const int s = static_cast<int>(slot_names_.size());
    slot[name] = s;
    slot_names_.push_back(name);
    return s;
  };
  for (const auto& in : g.inputs()) input_slots_.push_back(define(in.name()));
  for (const auto& p : g.parameters()) parameter_slots_.push_back(define(p.name()));
  const int first_node_slot = static_cast<int>(slot_names_.size());
  std::vector<int> last_reader;  // per slot: index of the last node reading it (-1: none)
  std::vector<int> definer;      // per node-output slot: index of its node
  for (int i = 0; i < g.nodes_size(); ++i) {
    const v1::Node& n = g.nodes(i);
    Step step;
    step.node = &n;
    step.entry = ExecTable::Global().Find(n.op());
    for (const std::string& in : n.inputs()) {
      if (in.empty()) {
        step.inputs.push_back(-1);
        continue;
      }
      auto it = slot.find(in);
      if (it == slot.end()) {
        // Parameters may be read by an alias.
        const v1::Parameter* p = graph_.FindParameter(in);
        if (p != nullptr) it = slot.find(p->name());
      }
      if (it == slot.end()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", n.name(), "' reads unknown value '", in, "'"));
      }
      step.inputs.push_back(it->second);
    }
    for (const std::string& out : n.outputs()) {
      step.outputs.push_back(define(out));
      definer.push_back(i);
      step.output_types.push_back(graph_.TypeOf(out));
    }
    steps_.push_back(std::move(step));
  }
  last_reader.assign(slot_names_.size(), -1);
  for (int i = 0; i < static_cast<int>(steps_.size()); ++i) {
    for (int s : steps_[i].inputs) {
      if (s >= 0) last_reader[s] = i;
    }
  }
  std::vector<bool> keep(slot_names_.size(), false);
  for (int s : parameter_slots_) keep[s] = true;  // owned by the parameter store anyway
  for (const std::string& out : g.outputs()) {
    auto it = slot.find(out);
    if (it == slot.end()) return absl::InvalidArgumentError(absl::StrCat("graph output '", out, "' is undefined"));
    output_slots_.push_back(it->second);
    keep[it->second] = true;
  }
  for (const auto& u : g.buffer_updates()) {
    auto it = slot.find(u.value());
    if (it == slot.end()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer update of '", u.buffer(), "' reads undefined '", u.value(), "'"));
    }
    buffer_slots_.emplace_back(u.buffer(), it->second);
    keep[it->second] = true;
  }
  for (int s = 0; s < static_cast<int>(slot_names_.size()); ++s) {
    if (keep[s]) continue;
    int at = last_reader[s];
    // Never read: release right after the node that defines it.
    if (at < 0 && s >= first_node_slot) at = definer[s - first_node_slot];
    if (at >= 0) steps_[at].release.push_back(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<Executor::Result> Executor::Run(const TensorMap& inputs, RunMode mode) {
  const v1::Graph& g = graph_.proto();
  std::vector<at::Tensor> values(slot_names_.size());
  for (int i = 0; i < g.inputs_size(); ++i) {
    const auto& in = g.inputs(i);
    auto it = inputs.find(in.name());
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", g.name(), "' needs input '", in.name(), "' (",
                                                     TensorType::FromProto(in.type()).ToString(), ")"));
    }
    const TensorType type = TensorType::FromProto(in.type());
    if (!MatchesType(it->second, type)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name(), "' is ", DescribeTensor(it->second),
                                                     " but graph '", g.name(), "' declares ", type.ToString()));
    }
    values[input_slots_[i]] = it->second.device() == device_ ? it->second : it->second.to(device_);
  }
  if (inputs.size() != static_cast<size_t>(g.inputs_size())) {
    for (const auto& kv : inputs) {
      bool known = false;
      for (const auto& in : g.inputs()) known |= in.name() == kv.first;
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat("graph '", g.name(), "' has no input '", kv.first, "'"));
      }
    }
  }
  for (int i = 0; i < g.parameters_size(); ++i) values[parameter_slots_[i]] = *params_.Find(g.parameters(i).name());

  const bool training = mode == RunMode::kTrain;
  std::optional<at::NoGradGuard> no_grad;
  if (!training) no_grad.emplace();
  for (const Step& step : steps_) {
    const v1::Node& n = *step.node;
    std::vector<at::Tensor> ins;
    ins.reserve(step.inputs.size());
    for (int s : step.inputs) ins.push_back(s >= 0 ? values[s] : at::Tensor());
    std::vector<at::Tensor> outs;
    try {
      ExecContext ctx(n, std::move(ins), step.output_types, device_, training);
      outs = step.entry->fn(ctx);
    } catch (const std::exception& e) {
      return TorchError(absl::StatusCode::kInternal, absl::StrCat("node '", n.name(), "' (", n.op(), ")"), e);
    }
    if (outs.size() != step.outputs.size()) {
      return absl::InternalError(absl::StrCat("node '", n.name(), "' (", n.op(), ") gave ", outs.size(),
                                              " outputs, the graph has ", step.outputs.size()));
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!MatchesType(outs[k], step.output_types[k])) {
        return absl::InternalError(absl::StrCat("node '", n.name(), "' (", n.op(), ") output ", k, " is ",
                                                DescribeTensor(outs[k]), " but the graph says ",
                                                step.output_types[k].ToString(),
                                                " (the registry's inference and LibTorch disagree)"));
      }
      values[step.outputs[k]] = std::move(outs[k]);
    }
    for (int s : step.release) values[s].reset();
  }
  Result result;
  for (int s : output_slots_) result.outputs.push_back(values[s]);
  for (const auto& [buffer, s] : buffer_slots_) result.buffer_updates.emplace_back(buffer, values[s]);
  return result;
}

absl::Status Executor::ApplyBufferUpdates(const Result& result) {
  at::NoGradGuard no_grad;
  for (const auto& [buffer, value] : result.buffer_updates) {
    at::Tensor* b = params_.FindMutable(buffer);
    if (b == nullptr) return absl::InvalidArgumentError(absl::StrCat("buffer update of unknown buffer '", buffer, "'"));
    if (!value.defined() || value.sizes() != b->sizes()) {
      return absl::InternalError(absl::StrCat("buffer '", buffer, "' is ", DescribeTensor(*b), ", its update is ",
                                              DescribeTensor(value)));
    }
    MAPD_RETURN_IF_ERROR(CatchTorch(absl::StrCat("updating buffer '", buffer, "'"),
                                    [&] { b->copy_(value.detach()); }));
  }
  return absl::OkStatus();
}

}  // namespace mapd
