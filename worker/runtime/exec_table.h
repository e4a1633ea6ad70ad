// The execution table: for every op of the registry (model/ops), the LibTorch call that runs
// it, keyed by the same op name. It is the registry's parallel table in the worker (see
// model/ops/registry.h): the registry says what an op means and infers its types, this table
// computes it.
//
// Each entry also says what autograd keeps for backward when the op runs with gradients
// (`saved`): the symbolic profiler models exactly these implementations, so the two must
// agree. "Views" share their input's storage and save nothing.
#ifndef MAPD_WORKER_RUNTIME_EXEC_TABLE_H_
#define MAPD_WORKER_RUNTIME_EXEC_TABLE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/ir/attrs.h"
#include "model/ir/tensor_type.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// What an op implementation sees: the node, its input tensors (undefined for an absent
// optional input), the output types the IR recorded, and the run's settings. Attribute
// readers return the default for an absent attribute; the graph was verified, so kinds fit
// (a misfit throws std::invalid_argument, which the executor reports with the node).
class ExecContext {
 public:
  ExecContext(const v1::Node& node, std::vector<at::Tensor> inputs, std::vector<TensorType> output_types,
              c10::Device device, bool training)
      : node_(node), inputs_(std::move(inputs)), output_types_(std::move(output_types)), device_(device),
        training_(training) {}

  const v1::Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].defined(); }
  const at::Tensor& in(int i) const;  // throws when absent
  const std::vector<at::Tensor>& inputs() const { return inputs_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  c10::Device device() const { return device_; }
  // False for evaluation runs: dropout (the op, and sdpa's dropout_p) is then the identity.
  bool training() const { return training_; }

  // Dropout noise: bernoulli(1 - p) / (1 - p) shaped like `like`. By default ATen's own draw
  // (at::dropout, from the default generator); a rank of a multi-rank plan sets its own, which
  // draws the global noise from the step's generator and keeps the rank's block, so N ranks
  // drop exactly what one device drops.
  using NoiseFn = std::function<at::Tensor(const at::Tensor& like, double p)>;
  void set_dropout_noise(NoiseFn fn) { dropout_noise_ = std::move(fn); }
  // The generator random creation ops (bernoulli) draw their global tensor from: the default
  // generator unless set (a rank sets the step's, seeded as the single-device trainer seeds the
  // default one, so every rank draws what one device draws and keeps its block).
  void set_generator(at::Generator generator) { generator_ = std::move(generator); }
  c10::optional<at::Generator> generator() const {
    return generator_.defined() ? c10::optional<at::Generator>(generator_) : c10::nullopt;
  }
  // x with dropout p applied (training only; the identity otherwise or for p = 0).
  at::Tensor Dropout(const at::Tensor& x, double p) const;

  bool has(const std::string& attr) const;
  int64_t Int(const std::string& attr, int64_t def) const;
  double Float(const std::string& attr, double def) const;
  bool Bool(const std::string& attr, bool def) const;
  std::string Str(const std::string& attr, const std::string& def) const;
  std::vector<int64_t> Ints(const std::string& attr, const std::vector<int64_t>& def) const;
  // A number attribute as an at::Scalar that keeps int vs float (type promotion depends on it).
  c10::Scalar Scalar(const std::string& attr) const;
  // A dtype attribute ("f32", "int64", ...) or `def`.
  c10::ScalarType DType(const std::string& attr, c10::ScalarType def) const;

 private:
  const v1::AttrValue* Find(const std::string& attr) const;

  const v1::Node& node_;
  std::vector<at::Tensor> inputs_;
  std::vector<TensorType> output_types_;
  c10::Device device_;
  bool training_;
  NoiseFn dropout_noise_;
  at::Generator generator_;
};

// Whether executing `node` draws random numbers in training (dropout, bernoulli, attention with
// dropout_p > 0): trainers seed a generator per step only for graphs that have one.
bool DrawsRandomNumbers(const v1::Node& node);

// Runs the op; returns one tensor per node output. May throw LibTorch exceptions; the
// executor catches them and names the node.
using ExecFn = std::function<std::vector<at::Tensor>(const ExecContext&)>;

struct ExecEntry {
  std::string op;
  ExecFn fn;
  // What autograd saves for backward with this implementation, e.g. "x, weight" for linear;
  // "nothing (view)" for views. Tensors are named by the op's inputs/outputs as in docs/ops.md.
  std::string saved;
};

class ExecTable {
 public:
  // The table with every built-in op.
  static const ExecTable& Global();

  // nullptr when the op has no entry.
  const ExecEntry* Find(const std::string& op) const;
  std::vector<std::string> Names() const;
  const std::map<std::string, ExecEntry>& entries() const { return entries_; }

  void Add(ExecEntry entry);

 private:
  std::map<std::string, ExecEntry> entries_;
};

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_EXEC_TABLE_H_
