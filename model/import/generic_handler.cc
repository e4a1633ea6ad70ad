// The generic path's import (DESIGN §4a): an aten op with no handler of its own becomes one
// "aten" node (model/ops/generic_op.h) whose facts are measured here through LibTorch — the op
// run on meta tensors (on small real ones where it has no meta kernel), what its backward keeps
// reported by autograd's saved-tensor hooks as it is packed, and whether it treats samples
// independently checked by running it on a split and a whole batch.
#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <mutex>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/import/generic_call.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {
namespace {

// ---- what backward keeps: autograd's saved-tensor hooks from C++ ----
//
// LibTorch 1.13 exposes default saved-tensor hooks to C++ only through the autograd engine
// (Engine::get_default_saved_variable_hooks, which Python's engine overrides for
// torch.autograd.graph.saved_tensors_hooks). This engine is the default one with that method
// answering, on a thread that is recording, a hook that keeps the packed tensor in the record.
thread_local std::vector<at::Tensor>* recording = nullptr;

struct RecordingHooks : torch::autograd::SavedVariableHooks {
  explicit RecordingHooks(std::vector<at::Tensor>* sink) : sink_(sink) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    kept_ = tensor;
    sink_->push_back(tensor);
  }
  at::Tensor call_unpack_hook() override { return kept_; }
  std::vector<at::Tensor>* sink_;
  at::Tensor kept_;
};

struct RecordingEngine : torch::autograd::Engine {
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (recording == nullptr) return nullptr;
    return std::make_unique<RecordingHooks>(recording);
  }
};

torch::autograd::Engine& GetRecordingEngine() {
  static RecordingEngine* engine = new RecordingEngine();  // lives as long as the process
  return *engine;
}

// While one lives, tensors autograd saves on this thread are recorded.
class SavedTensorRecord {
 public:
  SavedTensorRecord() {
    static std::once_flag installed;
    std::call_once(installed, [] { torch::autograd::set_default_engine_stub(&GetRecordingEngine); });
    previous_ = recording;
    recording = &saved_;
  }
  ~SavedTensorRecord() { recording = previous_; }
  const std::vector<at::Tensor>& saved() const { return saved_; }

 private:
  std::vector<at::Tensor> saved_;
  std::vector<at::Tensor>* previous_ = nullptr;
};

// The bytes of the storages of `tensors`, each storage counted once, leaving out those `skip` names.
template <typename Skip>
int64_t DistinctStorageBytes(const std::vector<at::Tensor>& tensors, Skip skip) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && !skip(t) && seen.insert(t.storage().unsafeGetStorageImpl()).second) {
      bytes += static_cast<int64_t>(t.storage().nbytes());
    }
  }
  return bytes;
}

// The op's inputs as tensors of `types` on `device` (random values on the CPU: floats in
// [0, 1), integers 0, which every index accepts), those in `grad` requiring a gradient.
std::vector<at::Tensor> MakeInputs(const std::vector<TensorType>& types, const std::vector<bool>& grad, c10::Device device) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < types.size(); ++i) {
    const auto opts = at::TensorOptions().dtype(ToScalarType(types[i].dtype)).device(device);
    at::Tensor t;
    if (device.is_meta()) t = at::empty(types[i].shape, opts);
    // Floats in [0, 1): in the domain of most ops (log, sqrt, acos, binary cross-entropy).
    else if (IsFloating(types[i].dtype)) t = at::rand(types[i].shape, opts);
    else if (types[i].dtype == v1::BOOL) t = at::randint(0, 2, types[i].shape, opts);
    else t = at::zeros(types[i].shape, opts);
    if (grad[i]) t.requires_grad_(true);
    out.push_back(t);
  }
  return out;
}


// ---- workspace: CPU allocations while the op runs ----
//
// The CPU allocator reports every allocation and free to the thread's PROFILER_STATE debug
// info when it asks for them (c10::MemoryReportingInfoBase): the bytes live beyond the start,
// and their peak.
class AllocationWatch : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t bytes, int64_t, int64_t, c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU) return;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }

 private:
  int64_t live_ = 0, peak_ = 0;
};

// Forward and backward temporaries of one run on real CPU tensors of `types`: the peak of what
// was allocated during each pass, beyond what the pass leaves (forward: outputs and saved
// tensors; backward: the inputs' gradients). Zeros when the op does not run on them.
struct Workspace {
  int64_t forward = 0, backward = 0;
};

Workspace MeasureWorkspace(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                           const std::vector<TensorType>& types, const std::vector<bool>& grad) {
  Workspace w;
  try {
    std::vector<at::Tensor> inputs = MakeInputs(types, grad, c10::kCPU);
    auto fwd = std::make_shared<AllocationWatch>();
    absl::StatusOr<std::vector<at::Tensor>> out = absl::UnknownError("");
    {
      c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, fwd);
      out = CallAten(op, args, inputs, c10::kCPU, c10::nullopt);
    }
    if (!out.ok()) return w;
    w.forward = std::max<int64_t>(0, fwd->peak() - fwd->live());
    std::vector<at::Tensor> outs, grads_out, wrt;
    for (const at::Tensor& o : *out) {
      if (o.requires_grad()) {
        outs.push_back(o);
        grads_out.push_back(at::rand_like(o));
      }
    }
    for (const at::Tensor& t : inputs) {
      if (t.requires_grad()) wrt.push_back(t);
    }
    if (outs.empty() || wrt.empty()) return w;
    auto bwd = std::make_shared<AllocationWatch>();
    std::vector<at::Tensor> grads;
    {
      c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, bwd);
      grads = torch::autograd::grad(outs, wrt, grads_out, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    const int64_t kept = DistinctStorageBytes(grads, [](const at::Tensor&) { return false; });
    w.backward = std::max<int64_t>(0, bwd->peak() - kept);
  } catch (const std::exception&) {
    return Workspace();
  }
  return w;
}

// ---- the op's arguments ----

c10::TypePtr Unwrapped(const c10::TypePtr& t) {
  return t->kind() == c10::TypeKind::OptionalType ? t->containedTypes()[0] : t;
}

absl::StatusOr<std::vector<int64_t>> IntsOfConst(const c10::IValue& v) {
  std::vector<int64_t> out;
  if (v.isInt()) return std::vector<int64_t>{v.toInt()};
  if (v.isIntList()) return v.toIntVector();
  if (v.isBoolList()) {
    for (bool b : v.toBoolList()) out.push_back(b ? 1 : 0);
    return out;
  }
  return absl::InvalidArgumentError("not a list of integers");
}

// A known argument (number, list, string) as a GenericArg of the schema's type.
absl::StatusOr<GenericArg> ConstArg(const c10::TypePtr& type, const AValue& a) {
  GenericArg g;
  using K = GenericArg::Kind;
  if (a.is_none()) return g;  // kNone
  c10::IValue v = a.constant;
  if (a.kind == AValue::Kind::kList) {  // items all known
    c10::impl::GenericList list(c10::AnyType::get());
    for (const auto& it : a.items) {
      if (it.kind != AValue::Kind::kConst) return absl::InvalidArgumentError("a list with tensor items");
      list.push_back(it.constant);
    }
    std::vector<int64_t> ints;
    std::vector<double> floats;
    for (const auto& it : a.items) {
      if (it.constant.isInt()) ints.push_back(it.constant.toInt());
      if (it.constant.isDouble()) floats.push_back(it.constant.toDouble());
    }
    if (ints.size() == a.items.size()) v = c10::IValue(ints);
    else if (floats.size() == a.items.size()) v = c10::IValue(c10::List<double>(floats));
    else return absl::InvalidArgumentError("a list of mixed values");
  } else if (a.kind != AValue::Kind::kConst) {
    return absl::InvalidArgumentError("a value not known at import time");
  }
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
      if (!v.isInt()) break;
      g.kind = K::kInt;
      g.ints = {v.toInt()};
      return g;
    case c10::TypeKind::FloatType:
      if (!v.isDouble() && !v.isInt()) break;
      g.kind = K::kFloat;
      g.floats = {v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt())};
      return g;
    case c10::TypeKind::BoolType:
      if (!v.isBool() && !v.isInt()) break;
      g.kind = K::kBool;
      g.ints = {v.isBool() ? v.toBool() : v.toInt() != 0};
      return g;
    case c10::TypeKind::NumberType:  // Scalar: keep int vs float (type promotion depends on it)
      if (v.isDouble()) {
        g.kind = K::kFloat;
        g.floats = {v.toDouble()};
      } else if (v.isInt() || v.isBool()) {
        g.kind = v.isBool() ? K::kBool : K::kInt;
        g.ints = {v.isBool() ? v.toBool() : v.toInt()};
      } else {
        break;
      }
      return g;
    case c10::TypeKind::StringType:
      if (!v.isString()) break;
      g.kind = K::kString;
      g.text = v.toStringRef();
      return g;
    case c10::TypeKind::DeviceObjType:
      g.kind = K::kDevice;
      return g;
    case c10::TypeKind::ListType: {
      const c10::TypeKind elem = type->containedTypes()[0]->kind();
      if (elem == c10::TypeKind::FloatType && v.isDoubleList()) {
        g.kind = K::kFloats;
        for (double f : v.toDoubleVector()) g.floats.push_back(f);
        return g;
      }
      if (v.isInt() || v.isIntList() || v.isBoolList()) {
        g.kind = elem == c10::TypeKind::BoolType ? K::kBools : K::kInts;
        MAPD_ASSIGN_OR_RETURN(g.ints, IntsOfConst(v));
        return g;
      }
      break;
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("a ", v.tagKind(), " where the schema wants ", type->str()));
}

// The node's arguments as GenericArgs and its tensor inputs as IR values, in schema order.
struct CallSite {
  std::vector<GenericArg> args;
  std::vector<std::string> inputs;
};

absl::StatusOr<int64_t> TensorInput(Importer& im, Node* n, const AValue& a, CallSite& site) {
  std::string name;
  if (a.is_tensor()) {
    name = a.tensor;
  } else if (a.kind == AValue::Kind::kConstTensor) {
    MAPD_ASSIGN_OR_RETURN(name, im.ConstantTensor(n, a));
  } else if (a.is_number()) {
    MAPD_ASSIGN_OR_RETURN(name, im.ScalarTensor(n, a));
  } else {
    return im.Error(n, "a tensor argument is not a tensor");
  }
  site.inputs.push_back(name);
  return static_cast<int64_t>(site.inputs.size()) - 1;
}

absl::StatusOr<CallSite> CallSiteOf(Importer& im, Node* n, const c10::FunctionSchema& schema, const Args& args) {
  CallSite site;
  if (args.size() != schema.arguments().size()) {
    return im.Error(n, absl::StrCat("has ", args.size(), " arguments, its schema ", schema.arguments().size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::Argument& formal = schema.arguments()[i];
    const c10::TypePtr type = Unwrapped(formal.type());
    const AValue& a = args[i];
    GenericArg g;
    if (type->kind() == c10::TypeKind::TensorType && !a.is_none()) {
      g.kind = GenericArg::Kind::kTensor;
      MAPD_ASSIGN_OR_RETURN(int64_t idx, TensorInput(im, n, a, site));
      g.ints = {idx};
    } else if (type->kind() == c10::TypeKind::ListType &&
               Unwrapped(type->containedTypes()[0])->kind() == c10::TypeKind::TensorType) {
      const bool optional = type->containedTypes()[0]->kind() == c10::TypeKind::OptionalType;
      g.kind = optional ? GenericArg::Kind::kOptionalTensorList : GenericArg::Kind::kTensorList;
      for (const AValue& item : a.items) {
        if (optional && item.is_none()) {
          g.ints.push_back(-1);
          continue;
        }
        MAPD_ASSIGN_OR_RETURN(int64_t idx, TensorInput(im, n, item, site));
        g.ints.push_back(idx);
      }
    } else if (type->kind() == c10::TypeKind::GeneratorType) {
      if (!a.is_none()) return im.Error(n, "takes an explicit torch.Generator; MAP draws from its own per step");
      g.kind = GenericArg::Kind::kGenerator;
    } else if (a.is_tensor()) {
      return im.Error(n, absl::StrCat("argument '", formal.name(), "' is a tensor computed from the inputs where the "
                                      "schema wants ", formal.type()->str(), " (a value known only when it runs)"));
    } else {
      auto c = ConstArg(type, a);
      if (!c.ok()) return im.Error(n, absl::StrCat("argument '", formal.name(), "': ", c.status().message()));
      g = *c;
    }
    site.args.push_back(std::move(g));
  }
  return site;
}

// ---- measuring ----

// The shapes of the op's outputs for inputs of `types` holding the same value everywhere (0,
// or true): compared with a run on random values, they tell an op whose output shape depends on
// its inputs' values (nonzero, unique, masked_select).
std::vector<std::vector<int64_t>> ShapesOnConstantInputs(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                                                         const std::vector<TensorType>& types) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> in;
  for (const auto& t : types) {
    const auto opts = at::TensorOptions().dtype(ToScalarType(t.dtype));
    in.push_back(t.dtype == v1::BOOL ? at::ones(t.shape, opts) : at::zeros(t.shape, opts));
  }
  std::vector<std::vector<int64_t>> shapes;
  auto out = CallAten(op, args, in, c10::kCPU, c10::nullopt);
  if (out.ok()) {
    for (const at::Tensor& o : *out) shapes.push_back(o.sizes().vec());
  }
  return shapes;
}

// One run of the op with gradients on: its outputs and what backward keeps.
struct Run {
  std::vector<at::Tensor> inputs, outputs;
  std::vector<at::Tensor> saved;
};

absl::StatusOr<Run> RunOnce(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                            const std::vector<TensorType>& types, const std::vector<bool>& grad, c10::Device device) {
  Run r;
  r.inputs = MakeInputs(types, grad, device);
  SavedTensorRecord record;
  MAPD_ASSIGN_OR_RETURN(r.outputs, CallAten(op, args, r.inputs, device, c10::nullopt));
  r.saved = record.saved();
  return r;
}

// What backward keeps beyond the op's inputs and outputs.
int64_t SavedExtraBytes(const Run& r) {
  return DistinctStorageBytes(r.saved, [&r](const at::Tensor& s) {
    bool known = false;
    for (const auto& t : r.inputs) known |= s.is_alias_of(t);
    for (const auto& t : r.outputs) known |= s.is_alias_of(t);
    return known;
  });
}

std::vector<TensorType> WithBatch(std::vector<TensorType> types, const std::vector<int64_t>& dims, int64_t batch) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (dims[i] >= 0) types[i].shape[dims[i]] = batch;
  }
  return types;
}

int64_t FirstDimOf(const std::vector<int64_t>& shape, int64_t size) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == size) return static_cast<int64_t>(d);
  }
  return -1;
}

// Whether the op treats samples independently: run on a batch of 2 and on each sample alone
// (real tensors, no gradients), the whole's outputs must be the parts' outputs concatenated.
bool VerifiedPerSample(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                       const std::vector<TensorType>& in, const GenericBatchRule& rule) {
  try {
    at::NoGradGuard no_grad;
    const std::vector<TensorType> two = WithBatch(in, rule.inputs, 2);
    std::vector<at::Tensor> whole = MakeInputs(two, std::vector<bool>(in.size(), false), c10::kCPU);
    auto out = CallAten(op, args, whole, c10::kCPU, c10::nullopt);
    if (!out.ok() || out->size() != rule.outputs.size()) return false;
    std::vector<std::vector<at::Tensor>> parts(out->size());
    for (int64_t s = 0; s < 2; ++s) {
      std::vector<at::Tensor> part;
      for (size_t i = 0; i < whole.size(); ++i) part.push_back(rule.inputs[i] >= 0 ? whole[i].narrow(rule.inputs[i], s, 1) : whole[i]);
      auto got = CallAten(op, args, part, c10::kCPU, c10::nullopt);
      if (!got.ok() || got->size() != out->size()) return false;
      for (size_t o = 0; o < got->size(); ++o) parts[o].push_back((*got)[o]);
    }
    for (size_t o = 0; o < out->size(); ++o) {
      const at::Tensor joined = at::cat(parts[o], rule.outputs[o]);
      const at::Tensor& w = (*out)[o];
      if (joined.sizes() != w.sizes() || joined.scalar_type() != w.scalar_type()) return false;
      if (w.is_floating_point() ? !at::allclose(joined, w, 1e-5, 1e-6, /*equal_nan=*/true) : !at::equal(joined, w)) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The functional form of an in-place op: the same overload, else the one overload whose
// arguments have the same names and types (bernoulli_.float -> bernoulli.p).
absl::StatusOr<c10::OperatorHandle> FunctionalOf(const c10::FunctionSchema& inplace, const std::string& name) {
  const std::string same = inplace.overload_name().empty() ? name : absl::StrCat(name, ".", inplace.overload_name());
  if (auto op = FindAtenOperator(same); op.ok()) return op;
  for (const c10::OperatorName& candidate : c10::Dispatcher::singleton().getAllOpNames()) {
    if (candidate.name != name) continue;
    auto op = c10::Dispatcher::singleton().findSchema(candidate);
    if (!op.has_value() || op->schema().is_mutable()) continue;
    const auto& want = inplace.arguments();
    const auto& have = op->schema().arguments();
    bool same_args = want.size() == have.size();
    for (size_t i = 0; same_args && i < want.size(); ++i) {
      same_args = want[i].name() == have[i].name() && want[i].type()->str() == have[i].type()->str();
    }
    if (same_args) return FindAtenOperator(candidate.overload_name.empty() ? name : absl::StrCat(name, ".", candidate.overload_name));
  }
  return absl::NotFoundError(absl::StrCat("writes into its argument and has no functional form ", same));
}

// The workspaces of a random op are not measured (a draw is no temporary worth the run); of a
// per-sample op, at a batch of 1 and of 2, the bytes of another batch following from the two; of
// another op, at the import's sizes when they are small enough to run here (else unknown: 0).
void MeasureWorkspaces(const c10::OperatorHandle& op, const std::vector<bool>& grad, GenericNode* g) {
  if (g->random) return;
  if (g->batch.batch > 0) {
    const Workspace one = MeasureWorkspace(op, g->args, WithBatch(g->input_types, g->batch.inputs, 1), grad);
    const Workspace two = MeasureWorkspace(op, g->args, WithBatch(g->input_types, g->batch.inputs, 2), grad);
    auto fit = [](int64_t a, int64_t b) {
      const int64_t per = std::max<int64_t>(0, b - a);
      return LinearBytes{std::max<int64_t>(0, a - per), per};
    };
    g->workspace = fit(one.forward, two.forward);
    g->grad_workspace = fit(one.backward, two.backward);
    return;
  }
  int64_t bytes = 0;
  for (const auto& t : g->input_types) bytes += t.NumBytes();
  for (const auto& t : g->output_types) bytes += t.NumBytes();
  if (bytes > (int64_t{256} << 20)) return;
  const Workspace w = MeasureWorkspace(op, g->args, g->input_types, grad);
  g->workspace = {w.forward, 0};
  g->grad_workspace = {w.backward, 0};
}

std::string SchemaName(const c10::FunctionSchema& s) {
  return s.overload_name().empty() ? s.name() : absl::StrCat(s.name(), ".", s.overload_name());
}

// The operator a traced node runs: its own schema, or for an in-place variant its functional form.
absl::StatusOr<c10::OperatorHandle> OperatorOf(Importer& im, Node* n, bool* inplace) {
  const c10::FunctionSchema* traced = n->maybeSchema();
  if (traced == nullptr) return im.Error(n, "has no ATen schema; MAP cannot run it");
  std::string name = traced->name();
  *inplace = name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_';
  if (*inplace) name.pop_back();
  auto op = *inplace ? FunctionalOf(*traced, name) : FindAtenOperator(SchemaName(*traced));
  if (!op.ok()) return im.Error(n, std::string(op.status().message()));
  if (op->schema().is_mutable()) {
    return im.Error(n, absl::StrCat(SchemaName(op->schema()), " writes into its arguments; MAP runs only pure ops"));
  }
  return op;
}

// One run with gradients on: on meta tensors, else (no meta kernel) on real CPU tensors, whose
// output shapes must not depend on the values. Sets g->measured_on.
absl::StatusOr<Run> MeasuredRun(Importer& im, Node* n, const c10::OperatorHandle& op, const std::vector<bool>& grad,
                                GenericNode* g) {
  try {
    auto run = RunOnce(op, g->args, g->input_types, grad, c10::Device(c10::kMeta));
    if (run.ok()) return run;
  } catch (const std::exception&) {
    // No meta kernel (or one that fails): the CPU below.
  }
  int64_t bytes = 0;
  for (const auto& t : g->input_types) bytes += t.NumBytes();
  if (bytes > (int64_t{1} << 30)) {
    return im.Error(n, absl::StrCat(g->schema, " has no meta kernel and its inputs (", bytes, " bytes) are too large to run at import"));
  }
  absl::StatusOr<Run> run = absl::UnknownError("");
  try {
    run = RunOnce(op, g->args, g->input_types, grad, c10::kCPU);
  } catch (const std::exception& e) {
    const std::string why = e.what();
    return im.Error(n, absl::StrCat(g->schema, " cannot be evaluated on the CPU: ", why.substr(0, why.find('\n'))));
  }
  if (!run.ok()) return im.Error(n, std::string(run.status().message()));
  g->measured_on = "cpu";
  std::vector<std::vector<int64_t>> shapes;
  for (const at::Tensor& o : run->outputs) shapes.push_back(o.sizes().vec());
  std::vector<std::vector<int64_t>> other = shapes;
  try {
    other = ShapesOnConstantInputs(op, g->args, g->input_types);
  } catch (const std::exception&) {
    // It fails on constant values (a domain error): no evidence either way.
  }
  if (!other.empty() && other != shapes) {
    return im.Error(n, absl::StrCat(g->schema, ": the shapes of its outputs depend on the values of its inputs; MAP plans "
                                               "static shapes (compute a fixed-size result instead, e.g. torch.where over "
                                               "the whole tensor)"));
  }
  return run;
}

// Output types, views and gradients, and what backward keeps, from one run.
absl::Status RecordRun(Importer& im, Node* n, const Run& run, GenericNode* g) {
  for (const at::Tensor& t : run.outputs) {
    auto dtype = CheckedDType(t.scalar_type());
    if (!dtype.ok()) return im.Error(n, absl::StrCat(g->schema, ": output ", dtype.status().message()));
    g->output_types.push_back({*dtype, Shape(t.sizes().begin(), t.sizes().end())});
    int64_t alias = -1;
    for (size_t i = 0; i < run.inputs.size() && alias < 0; ++i) {
      if (t.is_alias_of(run.inputs[i])) alias = static_cast<int64_t>(i);
    }
    g->alias.push_back(alias);
    g->grad.push_back(t.requires_grad());
  }
  if (g->output_types.empty()) return im.Error(n, absl::StrCat(g->schema, " returns no tensor"));
  std::unordered_set<size_t> si, so;
  for (const at::Tensor& s : run.saved) {
    for (size_t i = 0; i < run.inputs.size(); ++i) {
      if (s.is_alias_of(run.inputs[i]) && si.insert(i).second) g->saved_inputs.push_back(static_cast<int64_t>(i));
    }
    for (size_t o = 0; o < run.outputs.size(); ++o) {
      if (s.is_alias_of(run.outputs[o]) && so.insert(o).second) g->saved_outputs.push_back(static_cast<int64_t>(o));
    }
  }
  g->saved_extra = {SavedExtraBytes(run), 0};
  return absl::OkStatus();
}

// Per-sample: every output and at least one input carry the model's batch, and the op on a split
// batch gives the whole's outputs split. Then what backward keeps beside inputs and outputs is
// measured at a second batch too: bytes = fixed + per sample x batch.
void ProveBatchRule(const c10::OperatorHandle& op, int64_t batch, const std::vector<bool>& grad, GenericNode* g) {
  if (batch <= 0 || g->random) return;
  GenericBatchRule rule;
  rule.batch = batch;
  bool any_batched = false;
  for (const auto& t : g->input_types) {
    rule.inputs.push_back(FirstDimOf(t.shape, batch));
    any_batched |= rule.inputs.back() >= 0;
  }
  for (const auto& t : g->output_types) {
    rule.outputs.push_back(FirstDimOf(t.shape, batch));
    if (rule.outputs.back() < 0) return;
  }
  if (!any_batched || !VerifiedPerSample(op, g->args, g->input_types, rule)) return;
  const int64_t other = batch > 1 ? 1 : 2;
  try {
    auto again = RunOnce(op, g->args, WithBatch(g->input_types, rule.inputs, other), grad,
                         g->measured_on == "meta" ? c10::Device(c10::kMeta) : c10::Device(c10::kCPU));
    if (!again.ok()) return;
    g->batch = rule;
    const int64_t at_batch = g->saved_extra.fixed;
    const int64_t per = (at_batch - SavedExtraBytes(*again)) / (batch - other);
    if (per >= 0 && at_batch - per * batch >= 0) g->saved_extra = {at_batch - per * batch, per};
  } catch (const std::exception&) {
    // It does not run at another batch after all: replicated.
  }
}

}  // namespace

Result EmitGeneric(Importer& im, Node* n, const Args& args) {
  bool inplace = false;
  MAPD_ASSIGN_OR_RETURN(c10::OperatorHandle op, OperatorOf(im, n, &inplace));
  Args call_args = args;
  if (inplace && DrawsRandom(op.schema()) && !call_args.empty() && call_args[0].kind == AValue::Kind::kConstTensor) {
    // An in-place random fill overwrites its target whatever it held (torch.empty_like(x).exponential_()):
    // the target is a made tensor of its shape, which a micro-batch or a device makes its share of.
    const at::Tensor& t = call_args[0].constant.toTensor();
    MAPD_ASSIGN_OR_RETURN(DType dtype, CheckedDType(t.scalar_type()));
    Attrs full;
    full.Ints("shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end())).Int("value", 0).Str("dtype", DTypeShortName(dtype));
    MAPD_ASSIGN_OR_RETURN(call_args[0], im.Emit1(n, "full", {}, full));
  }
  MAPD_ASSIGN_OR_RETURN(CallSite site, CallSiteOf(im, n, op.schema(), call_args));
  GenericNode g;
  g.schema = SchemaName(op.schema());
  g.args = site.args;
  g.random = DrawsRandom(op.schema());
  std::vector<bool> grad;
  for (const std::string& in : site.inputs) {
    g.input_types.push_back(*im.builder().TypeOf(in));
    grad.push_back(im.RequiresGrad(in) && IsFloating(g.input_types.back().dtype));
  }
  MAPD_ASSIGN_OR_RETURN(Run run, MeasuredRun(im, n, op, grad, &g));
  MAPD_RETURN_IF_ERROR(RecordRun(im, n, run, &g));
  ProveBatchRule(op, im.batch(), grad, &g);
  MeasureWorkspaces(op, grad, &g);
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> outs, im.Emit(n, kGenericOp, site.inputs, g.ToAttrs()));
  // A Tensor[] result (unbind, split) is one list value.
  if (n->outputs().size() == 1 && n->outputs()[0]->type()->kind() == c10::TypeKind::ListType) return std::vector<AValue>{ListOf(outs)};
  return outs;
}

}  // namespace import_internal
}  // namespace mapd
