// Executor: runs a graph's nodes in order with LibTorch on one device.
//
// It owns the parameters (parameters.h), looks every node's op up in the execution table
// (exec_table.h), and interprets the graph on a table of values: graph inputs, parameters,
// then each node's outputs. A value is released right after its last reader (graph outputs and
// buffer-update values are kept), so what stays alive is what autograd saved — the memory the
// profiler models. Every node's outputs are checked against the types the IR recorded, so a
// disagreement between the registry's inference and LibTorch surfaces at the node.
//
// Errors: INVALID_ARGUMENT for a bad graph or bad inputs; FAILED_PRECONDITION for a CUDA device
// in a build or machine without CUDA; INTERNAL, naming the node and op, when LibTorch throws.
#ifndef MAPD_WORKER_RUNTIME_EXECUTOR_H_
#define MAPD_WORKER_RUNTIME_EXECUTOR_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ir/graph.h"
#include "proto/mapd/v1/graph.pb.h"
#include "worker/runtime/exec_table.h"
#include "worker/runtime/parameters.h"
#include "worker/runtime/torch_types.h"

namespace mapd {

// "cpu", "cuda" or "cuda:N". FAILED_PRECONDITION for CUDA when LibTorch has no CUDA or sees no
// GPU (Debian's LibTorch is CPU-only); INVALID_ARGUMENT for anything else.
absl::StatusOr<c10::Device> ParseDevice(const std::string& text);

struct ExecutorOptions {
  // Where tensors live: "cpu", "cuda", "cuda:N".
  std::string device = "cpu";
  // Seed of the zoo parameters' init rules (imported parameters carry their data).
  uint64_t seed = 0;
};

enum class RunMode {
  kTrain,  // autograd records (trainable parameters require grad); dropout is active
  kEval,   // no autograd (NoGradGuard); dropout is the identity
};

class Executor {
 public:
  // Verifies the graph, checks that every op has an execution entry, and makes the
  // parameters.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(v1::Graph graph, const ExecutorOptions& options);

  struct Result {
    std::vector<at::Tensor> outputs;  // the graph's outputs, in order
    // (buffer, value) per BufferUpdate: what the buffer holds after the step.
    std::vector<std::pair<std::string, at::Tensor>> buffer_updates;
  };

  // Runs every node once. `inputs` holds each graph input by name with its declared dtype and
  // shape (INVALID_ARGUMENT otherwise; tensors on another device are moved).
  absl::StatusOr<Result> Run(const TensorMap& inputs, RunMode mode = RunMode::kTrain);

  // Writes each buffer update into its buffer, in place, without autograd.
  absl::Status ApplyBufferUpdates(const Result& result);

  const Graph& graph() const { return graph_; }
  const v1::Graph& proto() const { return graph_.proto(); }
  c10::Device device() const { return device_; }
  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }

 private:
  struct Step {
    const v1::Node* node;
    const ExecEntry* entry;
    std::vector<int> inputs;   // value slots; -1 for an absent optional input
    std::vector<int> outputs;  // value slots
    std::vector<TensorType> output_types;
    std::vector<int> release;  // slots whose last reader is this node
  };

  Executor(Graph graph, ParameterStore params, c10::Device device)
      : graph_(std::move(graph)), params_(std::move(params)), device_(device) {}
  absl::Status Plan();

  Graph graph_;
  ParameterStore params_;
  c10::Device device_;
  std::vector<std::string> slot_names_;
  std::vector<int> input_slots_;      // per graph input
  std::vector<int> parameter_slots_;  // per graph parameter
  std::vector<int> output_slots_;     // per graph output
  std::vector<std::pair<std::string, int>> buffer_slots_;
  std::vector<Step> steps_;
};

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_EXECUTOR_H_
