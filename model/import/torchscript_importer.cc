// Loading TorchScript archives, collecting parameters, and the abstract interpreter that
// walks the inlined forward graph (see torchscript_importer.h).
#include "model/import/torchscript_importer.h"

#include <ATen/ops/scalar_tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/graph/verifier.h"
#include "model/import/importer_internal.h"
#include "model/ops/generic_op.h"

namespace mapd {
namespace import_internal {

absl::StatusOr<DType> CheckedDType(c10::ScalarType t) {
  const DType d = FromScalarType(t);
  if (d == v1::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat("tensor dtype ", c10::toString(t), " is not supported by MAP"));
  }
  return d;
}

namespace {

std::string KindOf(torch::jit::Node* n) { return n->kind().toQualString(); }

// "x.1" → "x": TorchScript appends ".N" to disambiguate debug names.
std::string StripDebugSuffix(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return name;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, dot);
}

// Structural and shape-query nodes the interpreter handles itself.
const std::set<std::string>& InterpreterKinds() {
  static const std::set<std::string> kinds = {
      "prim::Constant",   "prim::GetAttr",      "prim::ListConstruct", "prim::ListUnpack",
      "prim::TupleConstruct", "prim::TupleUnpack", "prim::TupleIndex", "prim::If",
      "prim::Loop",       "prim::NumToTensor",  "prim::unchecked_cast", "prim::Uninitialized",
      "prim::RaiseException", "prim::device",   "prim::dtype",         "aten::size",
      "aten::dim",        "aten::numel",        "aten::len",           "aten::Int",
      "aten::Float",      "aten::Bool",         "aten::ScalarImplicit", "aten::__is__",
      "aten::__isnot__",  "aten::warn",         "aten::__getitem__",   "prim::requires_grad",
      "aten::is_floating_point", "prim::is_cuda", "aten::append",
  };
  return kinds;
}

}  // namespace

namespace {
// Whether an argument holds a graph tensor (directly or in a list or tuple).
bool DependsOnGraph(const AValue& a) {
  if (a.is_tensor()) return true;
  for (const auto& it : a.items) {
    if (DependsOnGraph(it)) return true;
  }
  return false;
}
bool DependsOnGraph(const std::vector<AValue>& args) {
  for (const auto& a : args) {
    if (DependsOnGraph(a)) return true;
  }
  return false;
}
}  // namespace

bool IsInterpreterKind(const std::string& kind) { return InterpreterKinds().count(kind) > 0; }

Importer::Importer(std::string graph_name, std::string source_path)
    : builder_(std::move(graph_name)), source_path_(std::move(source_path)) {
  const char* generic = std::getenv("MAPD_IMPORT_GENERIC_ONLY");
  generic_only_ = generic != nullptr && std::string(generic) == "1";
}

absl::Status Importer::Error(torch::jit::Node* n, const std::string& msg) const {
  std::string where = KindOf(n);
  const std::string scope = ScopeOf(n);
  if (!scope.empty()) where = absl::StrCat(where, " in module '", scope, "'");
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

std::string Importer::ScopeOf(torch::jit::Node* n) const {
  return scope_stack_.empty() ? std::string() : scope_stack_.back();
}

const AValue& Importer::Lookup(torch::jit::Value* v) const {
  static const AValue kNone;
  auto it = env_.find(v);
  return it == env_.end() ? kNone : it->second;
}

const TensorType& Importer::TypeOf(const AValue& v) const { return *builder_.TypeOf(v.tensor); }

absl::Status Importer::CollectParameters(torch::jit::Module& module) {
  auto add = [this](const std::string& name, const at::Tensor& t, v1::Parameter::Kind kind) -> absl::Status {
    auto it = param_by_impl_.find(t.unsafeGetTensorImpl());
    if (it != param_by_impl_.end()) {
      // Tied: the same tensor under another module path.
      builder_.AddParameterAlias(it->second, name);
      return builder_.status();
    }
    auto dtype = CheckedDType(t.scalar_type());
    if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': ", dtype.status().message()));
    v1::Parameter p;
    p.set_name(name);
    TensorType type{*dtype, Shape(t.sizes().begin(), t.sizes().end())};
    *p.mutable_type() = type.ToProto();
    p.set_kind(kind);
    p.set_trainable(kind == v1::Parameter::PARAMETER && t.requires_grad() && IsFloating(*dtype));
    p.mutable_data()->set_source(source_path_);
    p.mutable_data()->set_key(name);
    if (p.trainable()) grad_values_.insert(name);
    builder_.AddParameter(std::move(p));
    param_by_impl_[t.unsafeGetTensorImpl()] = name;
    param_kind_[name] = kind;
    return builder_.status();
  };
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    MAPD_RETURN_IF_ERROR(add(p.name, p.value, v1::Parameter::PARAMETER));
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    MAPD_RETURN_IF_ERROR(add(b.name, b.value, v1::Parameter::BUFFER));
  }
  return absl::OkStatus();
}

absl::Status Importer::BindInputs(torch::jit::Graph& g, torch::jit::Module& module,
                                  const std::vector<InputSpec>& specs) {
  if (g.inputs().empty()) return absl::InvalidArgumentError("forward() has no self argument");
  AValue self;
  self.kind = AValue::Kind::kModule;
  self.module = module._ivalue();
  Bind(g.inputs()[0], self);
  std::map<std::string, const InputSpec*> by_name;
  for (const auto& s : specs) by_name[s.name] = &s;
  std::vector<std::string> names;
  std::set<std::string> used;
  for (size_t i = 1; i < g.inputs().size(); ++i) {
    torch::jit::Value* in = g.inputs()[i];
    const std::string name = StripDebugSuffix(in->debugName());
    names.push_back(name);
    auto it = by_name.find(name);
    const bool optional = in->type()->kind() == c10::TypeKind::OptionalType;
    if (it == by_name.end()) {
      if (optional) {
        Bind(in, AValue::None());
        continue;
      }
      std::vector<std::string> have;
      for (const auto& s : specs) have.push_back(s.ToString());
      return absl::InvalidArgumentError(absl::StrCat(
          "forward() argument '", name, "' has no input spec; pass --input ", name,
          ":DTYPE[D0,D1,...] (or embed mapd_inputs.json)", have.empty() ? "" : absl::StrCat("; given: ", absl::StrJoin(have, " "))));
    }
    used.insert(name);
    c10::TypePtr t = in->type();
    if (optional) t = t->containedTypes()[0];
    if (t->kind() != c10::TypeKind::TensorType) {
      return absl::InvalidArgumentError(absl::StrCat("forward() argument '", name, "' has type ", t->str(),
                                                     "; only tensor arguments can be given by input specs"));
    }
    auto tt = t->expect<c10::TensorType>();
    const InputSpec& spec = *it->second;
    if (auto st = tt->scalarType(); st.has_value()) {
      auto traced = CheckedDType(*st);
      if (traced.ok() && *traced != spec.type.dtype) {
        return absl::InvalidArgumentError(absl::StrCat("input spec ", spec.ToString(), " gives dtype ",
                                                       DTypeShortName(spec.type.dtype), " but the model was traced with ",
                                                       DTypeShortName(*traced), " for '", name, "'"));
      }
    }
    if (auto rank = tt->sizes().size(); rank.has_value() && static_cast<int>(*rank) != spec.type.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("input spec ", spec.ToString(), " has rank ", spec.type.rank(),
                                                     " but the model was traced with a rank-", *rank, " '", name, "'"));
    }
    builder_.Input(name, spec.type);
    if (batch_ == 0 && spec.type.rank() > 0) batch_ = spec.type.shape[0];
    Bind(in, AValue::Tensor(name));
  }
  for (const auto& s : specs) {
    if (!used.count(s.name)) {
      return absl::InvalidArgumentError(absl::StrCat("input spec names '", s.name,
                                                     "', which is not a forward() argument; the arguments are: ",
                                                     names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
    }
  }
  return builder_.status();
}

absl::StatusOr<AValue> Importer::GetAttr(torch::jit::Node* n, const AValue& obj) {
  const std::string name = n->s(c10::attr::name);
  if (obj.kind != AValue::Kind::kModule) return Error(n, absl::StrCat("attribute '", name, "' of a non-module value"));
  if (!obj.module->type()->hasAttribute(name)) {
    return Error(n, absl::StrCat("module '", obj.path, "' has no attribute '", name, "'"));
  }
  c10::IValue attr = obj.module->getAttr(name);
  const std::string path = obj.path.empty() ? name : absl::StrCat(obj.path, ".", name);
  if (attr.isObject()) {
    AValue m;
    m.kind = AValue::Kind::kModule;
    m.module = attr.toObject();
    m.path = path;
    return m;
  }
  if (attr.isTensor()) {
    const at::Tensor& t = attr.toTensor();
    auto it = param_by_impl_.find(t.unsafeGetTensorImpl());
    if (it != param_by_impl_.end()) {
      AValue v = AValue::Tensor(it->second);
      v.path = it->second;
      return v;
    }
    // A tensor attribute that is neither parameter nor buffer is a constant. Folding works on
    // a copy (an in-place op must not change the module), one per attribute.
    auto copy = attribute_copies_.find(t.unsafeGetTensorImpl());
    if (copy == attribute_copies_.end()) {
      copy = attribute_copies_.emplace(t.unsafeGetTensorImpl(), AValue::ConstTensor(t.detach().clone(), path)).first;
    }
    return copy->second;
  }
  auto v = FromIValue(attr);
  if (!v) return Error(n, absl::StrCat("attribute '", path, "' has an unsupported type ", attr.tagKind()));
  return *v;
}

absl::StatusOr<AValue> Importer::ConstantValue(torch::jit::Node* n) {
  // A function value (the callee of prim::CallFunction) is resolved from its type at the call.
  if (n->output()->type()->kind() == c10::TypeKind::FunctionType) return AValue::None();
  auto iv = torch::jit::toIValue(n->output());
  if (!iv) return Error(n, absl::StrCat("constant of type ", n->output()->type()->str(), " has no value"));
  // A tensor constant of the trace; folding works on a copy, which leaves the graph's alone.
  if (iv->isTensor()) return *FromIValue(c10::IValue(iv->toTensor().detach().clone()));
  auto v = FromIValue(*iv);
  if (!v) return Error(n, "unsupported constant");
  return *v;
}

void Importer::RecordSliceView(const std::string& view, const std::string& base, const Attrs& slice) {
  views_[view] = SliceView{base, slice};
}

absl::Status Importer::WriteBack(torch::jit::Node* n, const std::string& old_name, const AValue& new_value) {
  auto kind = param_kind_.find(old_name);
  if (kind != param_kind_.end() && kind->second == v1::Parameter::BUFFER) builder_.BufferUpdate(old_name, new_value.tensor);
  // Later reads of every jit value holding the tensor see the update; so do views of it.
  for (auto& kv : env_) {
    if (kv.second.is_tensor() && kv.second.tensor == old_name) kv.second = new_value;
  }
  for (auto& kv : views_) {
    if (kv.second.base == old_name) kv.second.base = new_value.tensor;
  }
  auto view = views_.find(old_name);
  if (view == views_.end()) return absl::OkStatus();
  // Written through a slice: its base is the base with that slice replaced.
  const SliceView v = view->second;
  MAPD_ASSIGN_OR_RETURN(AValue base, Emit1(n, "slice_scatter", {v.base, new_value.tensor}, v.slice));
  return WriteBack(n, v.base, base);
}

absl::Status Importer::RebindInPlace(torch::jit::Node* n, torch::jit::Value* target, const AValue& new_value) {
  const AValue old = Lookup(target);
  if (old.is_tensor()) {
    MAPD_RETURN_IF_ERROR(WriteBack(n, old.tensor, new_value));
  } else if (old.kind == AValue::Kind::kConstTensor) {
    const at::Tensor& t = old.constant.toTensor();
    if (t.is_view()) {
      return Error(n, "writes a value computed from the inputs into part of a constant tensor; compute the "
                      "constant from an input instead (or write it with torch.where)");
    }
    for (auto& kv : env_) {
      if (kv.second.kind == AValue::Kind::kConstTensor && kv.second.constant.toTensor().is_same(t)) kv.second = new_value;
    }
  }
  Bind(target, new_value);
  return absl::OkStatus();
}

absl::Status Importer::RunIf(torch::jit::Node* n) {
  const AValue& cond = Lookup(n->inputs()[0]);
  if (cond.kind != AValue::Kind::kConst || !(cond.constant.isBool() || cond.constant.isInt())) {
    return Error(n, "the branch condition depends on tensor data; only shape-dependent control flow is supported");
  }
  const bool taken = cond.constant.isBool() ? cond.constant.toBool() : cond.constant.toInt() != 0;
  torch::jit::Block* block = n->blocks()[taken ? 0 : 1];
  MAPD_RETURN_IF_ERROR(RunBlock(block));
  for (size_t i = 0; i < n->outputs().size(); ++i) Bind(n->outputs()[i], Lookup(block->outputs()[i]));
  return absl::OkStatus();
}

absl::Status Importer::RunLoop(torch::jit::Node* n) {
  const AValue& trip = Lookup(n->inputs()[0]);
  const AValue& cond0 = Lookup(n->inputs()[1]);
  if (!trip.is_number() || !cond0.is_number()) {
    return Error(n, "the loop's trip count or condition depends on tensor data; only shape-dependent loops are supported");
  }
  const int64_t max_trips = trip.constant.isInt() ? trip.constant.toInt() : static_cast<int64_t>(trip.constant.toDouble());
  bool cond = cond0.constant.isBool() ? cond0.constant.toBool() : cond0.constant.toInt() != 0;
  torch::jit::Block* body = n->blocks()[0];
  std::vector<AValue> carried;
  for (size_t i = 2; i < n->inputs().size(); ++i) carried.push_back(Lookup(n->inputs()[i]));
  for (int64_t it = 0; it < max_trips && cond; ++it) {
    if (--loop_budget_ < 0) return Error(n, "loop unrolling exceeded 1M iterations");
    Bind(body->inputs()[0], AValue::Const(it));
    for (size_t i = 0; i < carried.size(); ++i) Bind(body->inputs()[i + 1], carried[i]);
    MAPD_RETURN_IF_ERROR(RunBlock(body));
    const AValue& c = Lookup(body->outputs()[0]);
    if (!c.is_number()) return Error(n, "the loop condition depends on tensor data");
    cond = c.constant.isBool() ? c.constant.toBool() : c.constant.toInt() != 0;
    for (size_t i = 0; i < carried.size(); ++i) carried[i] = Lookup(body->outputs()[i + 1]);
  }
  for (size_t i = 0; i < n->outputs().size(); ++i) Bind(n->outputs()[i], carried[i]);
  return absl::OkStatus();
}

// Calls are interpreted in place (rather than inlined up front) so that nodes of a submodule
// carry its full module path, e.g. "transformer.h.0.attn", as their scope.
absl::Status Importer::RunCall(torch::jit::Node* n, const std::vector<AValue>& args) {
  torch::jit::Function* fn = nullptr;
  std::vector<AValue> call_args = args;
  const bool method = n->kind() == c10::prim::CallMethod;
  if (method) {
    if (args.empty() || args[0].kind != AValue::Kind::kModule) return Error(n, "method call on a non-module value");
    fn = args[0].module->type()->findMethod(n->s(c10::attr::name));
    if (fn == nullptr) return Error(n, absl::StrCat("module '", args[0].path, "' has no method ", n->s(c10::attr::name)));
  } else {
    auto ft = n->input(0)->type()->cast<c10::FunctionType>();
    if (!ft) return Error(n, "call of a value that is not a function");
    fn = ft->function();
    call_args.erase(call_args.begin());
  }
  if (++call_depth_ > 256) return Error(n, "calls nest more than 256 deep");
  std::shared_ptr<torch::jit::Graph> callee = torch::jit::toGraphFunction(*fn).graph();
  if (callee->inputs().size() != call_args.size()) {
    return Error(n, absl::StrCat("calling ", fn->name(), " with ", call_args.size(), " arguments, it takes ",
                                 callee->inputs().size()));
  }
  for (size_t i = 0; i < call_args.size(); ++i) Bind(callee->inputs()[i], call_args[i]);
  if (method) scope_stack_.push_back(args[0].path);
  absl::Status st = RunBlock(callee->block());
  if (method) scope_stack_.pop_back();
  --call_depth_;
  MAPD_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < n->outputs().size(); ++i) Bind(n->outputs()[i], Lookup(callee->outputs()[i]));
  return absl::OkStatus();
}

absl::Status Importer::RunBlock(torch::jit::Block* block) {
  for (torch::jit::Node* n : block->nodes()) {
    MAPD_RETURN_IF_ERROR(RunNode(n));
  }
  return absl::OkStatus();
}

absl::Status Importer::RunNode(torch::jit::Node* n) {
  const std::string kind = KindOf(n);
  std::vector<AValue> args;
  args.reserve(n->inputs().size());
  for (torch::jit::Value* in : n->inputs()) args.push_back(Lookup(in));
  auto bind1 = [&](AValue v) {
    Bind(n->output(), std::move(v));
    return absl::OkStatus();
  };

  if (kind == "prim::Constant") {
    MAPD_ASSIGN_OR_RETURN(AValue v, ConstantValue(n));
    return bind1(v);
  }
  if (kind == "prim::GetAttr") {
    MAPD_ASSIGN_OR_RETURN(AValue v, GetAttr(n, args[0]));
    return bind1(v);
  }
  if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct") {
    AValue v;
    v.kind = kind == "prim::ListConstruct" ? AValue::Kind::kList : AValue::Kind::kTuple;
    v.items = args;
    return bind1(v);
  }
  if (kind == "prim::ListUnpack" || kind == "prim::TupleUnpack") {
    std::vector<AValue> items = args[0].items;
    if (args[0].kind == AValue::Kind::kConst) {
      items.clear();
      const c10::IValue& c = args[0].constant;
      if (c.isList()) {
        for (const auto& e : c.toListRef()) items.push_back(*FromIValue(e));
      } else if (c.isTuple()) {
        for (const auto& e : c.toTupleRef().elements()) items.push_back(*FromIValue(e));
      }
    }
    if (items.size() != n->outputs().size()) {
      return Error(n, absl::StrCat("unpacking ", items.size(), " values into ", n->outputs().size()));
    }
    for (size_t i = 0; i < items.size(); ++i) Bind(n->outputs()[i], items[i]);
    return absl::OkStatus();
  }
  if (kind == "prim::TupleIndex" || (kind == "aten::__getitem__" && args[0].kind != AValue::Kind::kConst)) {
    if (!args[1].is_number()) return Error(n, "index is not a known integer");
    int64_t i = args[1].constant.toInt();
    const int64_t size = static_cast<int64_t>(args[0].items.size());
    if (i < 0) i += size;
    if (i < 0 || i >= size) return Error(n, absl::StrCat("index ", args[1].constant.toInt(), " out of range for ", size, " items"));
    return bind1(args[0].items[i]);
  }
  if (kind == "prim::CallMethod" || kind == "prim::CallFunction") return RunCall(n, args);
  if (kind == "prim::If") return RunIf(n);
  if (kind == "prim::Loop") return RunLoop(n);
  if (kind == "prim::NumToTensor") {
    AValue v = args[0];
    v.scalar_tensor = true;
    return bind1(v);
  }
  if (kind == "prim::unchecked_cast") return bind1(args[0]);
  if (kind == "prim::Uninitialized") return bind1(AValue::None());
  if (kind == "prim::RaiseException") {
    std::string msg = args.empty() || args[0].kind != AValue::Kind::kConst ? "" : args[0].constant.toStringRef();
    return Error(n, absl::StrCat("the model raises an exception for these inputs: ", msg));
  }
  if (kind == "aten::warn") return absl::OkStatus();
  if (kind == "aten::__is__" || kind == "aten::__isnot__") {
    const bool both_none = args[0].is_none() && args[1].is_none();
    const bool one_none = args[0].is_none() != args[1].is_none();
    if (!both_none && !one_none) return FoldConstant(n, args);
    const bool is = both_none;
    return bind1(AValue::Const(kind == "aten::__is__" ? is : !is));
  }
  // Shape queries on tensors.
  if (!args.empty() && args[0].is_tensor()) {
    const TensorType& t = TypeOf(args[0]);
    if (kind == "aten::size") {
      if (args.size() == 1) return bind1(AValue::Const(c10::IValue(c10::List<int64_t>(t.shape))));
      if (!args[1].is_number()) return Error(n, "size() dimension is not a known integer");
      int64_t d = args[1].constant.toInt();
      if (d < 0) d += t.rank();
      if (d < 0 || d >= t.rank()) {
        return Error(n, absl::StrCat("size(", args[1].constant.toInt(), ") of a ", t.ToString(),
                                     " tensor: no such dimension (does the input spec have the rank the model expects?)"));
      }
      return bind1(AValue::Const(t.shape[d]));
    }
    if (kind == "aten::dim") return bind1(AValue::Const(static_cast<int64_t>(t.rank())));
    if (kind == "aten::numel") return bind1(AValue::Const(t.NumElements()));
    if (kind == "aten::len") return bind1(AValue::Const(t.rank() == 0 ? int64_t{0} : t.shape[0]));
    if (kind == "prim::dtype") return bind1(AValue::Const(static_cast<int64_t>(ToScalarType(t.dtype))));
    if (kind == "prim::device") return bind1(AValue::Const(c10::Device(c10::kCPU)));
    if (kind == "aten::is_floating_point") return bind1(AValue::Const(IsFloating(t.dtype)));
    if (kind == "prim::requires_grad") return bind1(AValue::Const(IsFloating(t.dtype)));
    if (kind == "prim::is_cuda") return bind1(AValue::Const(false));
    if (kind == "aten::Int" || kind == "aten::Float" || kind == "aten::Bool" || kind == "aten::ScalarImplicit") {
      return Error(n, "converts tensor data to a number, which is not known at import time");
    }
  }
  if (kind == "aten::len" && args[0].kind == AValue::Kind::kList) {
    return bind1(AValue::Const(static_cast<int64_t>(args[0].items.size())));
  }
  // list.append(tensor) — a list comprehension over tensors — grows the list's abstract items
  // (TorchScript lists are mutable: the list's value is rebound; appends to known values fold).
  if (kind == "aten::append" && DependsOnGraph(args)) {
    AValue list = args[0];
    if (list.kind == AValue::Kind::kConst && list.constant.isList()) {
      std::vector<AValue> items;
      for (const c10::IValue& e : list.constant.toListRef()) items.push_back(*FromIValue(e));
      list = ListOf(std::move(items));
    }
    if (list.kind != AValue::Kind::kList) return Error(n, "append to a value that is not a list");
    list.items.push_back(args[1]);
    Bind(n->inputs()[0], list);
    return bind1(list);
  }

  // An op on values all known at import time (sizes, constants, masks built from them) is
  // evaluated now, unless it draws random numbers.
  if (IsTypeOnlyOp(kind) && !args.empty() && args[0].is_tensor()) {
    MAPD_ASSIGN_OR_RETURN(args[0], TypePlaceholder(n, args[0]));
  }
  if (!DependsOnGraph(args) && !IsRandomOp(kind)) {
    MAPD_ASSIGN_OR_RETURN(bool folded, TryFold(n, args));
    if (folded) return absl::OkStatus();
  }
  // A random op's first argument may be a constant it reads only the type of (the empty()
  // that bernoulli_ fills): its handler materialises it if it needs the values.
  for (size_t i = IsRandomOp(kind) ? 1 : 0; i < args.size(); ++i) {
    MAPD_ASSIGN_OR_RETURN(args[i], Materialise(n, args[i]));
  }

  auto h = generic_only_ ? AtenHandlers().end() : AtenHandlers().find(kind);
  std::vector<AValue> outs;
  if (h != AtenHandlers().end()) {
    auto handled = h->second(*this, n, args);
    if (!handled.ok() && builder_.status().ok()) {
      // A case the hand-written handler does not cover (aten::index with two index tensors):
      // the generic path is the floor under it.
      auto generic = EmitGeneric(*this, n, args);
      if (!generic.ok()) {
        return absl::Status(handled.status().code(), absl::StrCat(handled.status().message(), "; the generic path: ",
                                                                  generic.status().message()));
      }
      handled = std::move(generic);
    }
    MAPD_ASSIGN_OR_RETURN(outs, std::move(handled));
  } else if (absl::StartsWith(kind, "aten::")) {
    MAPD_ASSIGN_OR_RETURN(outs, EmitGeneric(*this, n, args));
  } else {
    return Error(n, "unsupported op");
  }
  if (outs.size() != n->outputs().size()) {
    return Error(n, absl::StrCat("handler produced ", outs.size(), " values for ", n->outputs().size(), " outputs"));
  }
  // In-place variants (relu_, add_, ...) update their first argument.
  const std::string op = n->kind().toUnqualString();
  if (op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_' && outs[0].is_tensor()) {
    MAPD_RETURN_IF_ERROR(RebindInPlace(n, n->inputs()[0], outs[0]));
  }
  for (size_t i = 0; i < outs.size(); ++i) Bind(n->outputs()[i], outs[i]);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AValue>> Importer::Emit(torch::jit::Node* n, const std::string& op,
                                                   const std::vector<std::string>& inputs, const Attrs& attrs) {
  builder_.PushScope(ScopeOf(n));
  std::vector<std::string> outs = builder_.Node(op, inputs, attrs);
  builder_.PopScope();
  if (!builder_.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(builder_.status().message(), " (from ", KindOf(n), ")"));
  }
  // Gradients as the profiler will decide them (a generic node's measured per output).
  bool any_grad = false;
  for (const auto& in : inputs) any_grad |= RequiresGrad(in);
  std::vector<int64_t> measured_grad;
  if (auto g = attrs.map().find("grad"); op == kGenericOp && g != attrs.map().end()) {
    measured_grad.assign(g->second.ints().values().begin(), g->second.ints().values().end());
  }
  std::vector<AValue> vals;
  for (size_t o = 0; o < outs.size(); ++o) {
    const bool measured = o >= measured_grad.size() || measured_grad[o] != 0;
    if (any_grad && measured && IsFloating(builder_.TypeOf(outs[o])->dtype)) grad_values_.insert(outs[o]);
    vals.push_back(AValue::Tensor(std::move(outs[o])));
  }
  return vals;
}

absl::StatusOr<AValue> Importer::Emit1(torch::jit::Node* n, const std::string& op,
                                       const std::vector<std::string>& inputs, const Attrs& attrs) {
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> outs, Emit(n, op, inputs, attrs));
  if (outs.size() != 1) return Error(n, absl::StrCat(op, " gave ", outs.size(), " values, expected 1"));
  return outs[0];
}

absl::StatusOr<v1::Graph> Importer::Run(torch::jit::Module& module, const std::vector<InputSpec>& specs) {
  if (!module.find_method("forward")) return absl::InvalidArgumentError("the module has no forward() method");
  std::shared_ptr<torch::jit::Graph> g = module.get_method("forward").graph();
  std::shared_ptr<torch::jit::Graph> inlined = g->copy();
  torch::jit::Inline(*inlined);

  MAPD_RETURN_IF_ERROR(CollectParameters(module));
  const std::map<std::string, int> unsupported = UnsupportedOps(*inlined, module._ivalue(), param_by_impl_);
  if (!unsupported.empty()) {
    std::vector<std::string> parts;
    int total = 0;
    for (const auto& kv : unsupported) {
      parts.push_back(absl::StrCat(kv.first, " (", kv.second, ")"));
      total += kv.second;
    }
    return absl::InvalidArgumentError(absl::StrCat("the model uses ", unsupported.size(), " unsupported op(s) at ",
                                                   total, " place(s): ", absl::StrJoin(parts, ", "),
                                                   "; see docs/ops.md for the supported ones"));
  }
  MAPD_RETURN_IF_ERROR(BindInputs(*g, module, specs));
  MAPD_RETURN_IF_ERROR(RunBlock(g->block()));

  std::function<absl::Status(const AValue&)> add_output = [&](const AValue& v) -> absl::Status {
    if (v.kind == AValue::Kind::kConstTensor) {
      MAPD_ASSIGN_OR_RETURN(AValue m, Materialise(g->return_node(), v));
      builder_.Output(m.tensor);
    } else if (v.is_tensor()) {
      builder_.Output(v.tensor);
    } else if (v.kind == AValue::Kind::kTuple || v.kind == AValue::Kind::kList) {
      for (const auto& it : v.items) MAPD_RETURN_IF_ERROR(add_output(it));
    }
    return builder_.status();
  };
  for (torch::jit::Value* out : g->outputs()) MAPD_RETURN_IF_ERROR(add_output(Lookup(out)));
  builder_.SetMetadata("source", source_path_);
  builder_.SetMetadata("importer", "torchscript");
  builder_.SetMetadata("mode", module.is_training() ? "train" : "eval");
  MAPD_ASSIGN_OR_RETURN(v1::Graph graph, builder_.Build());
  for (auto& in : *graph.mutable_inputs()) {
    for (const auto& s : specs) {
      if (s.name != in.name() || !s.range) continue;
      in.mutable_value_range()->set_low(s.range->first);
      in.mutable_value_range()->set_high(s.range->second);
    }
  }
  return graph;
}

}  // namespace import_internal

std::vector<std::string> SupportedAtenOps() {
  std::vector<std::string> out;
  for (const auto& kv : import_internal::AtenHandlers()) out.push_back(kv.first);
  return out;
}

std::vector<AtenOpPath> AtenOpPaths() {
  const auto& handlers = import_internal::AtenHandlers();
  std::map<std::string, AtenOpPath> rows;
  std::set<std::string> taken;
  for (const auto& kv : handlers) {
    rows[kv.first].op = kv.first;
    rows[kv.first].entry = true;
  }
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (!absl::StartsWith(name.name, "aten::")) continue;
    if (absl::StartsWith(name.name, "aten::_") && !handlers.count(name.name)) continue;  // internals
    auto op = c10::Dispatcher::singleton().findSchema(name);
    if (!op.has_value() || absl::EndsWith(name.overload_name, "out")) continue;
    AtenOpPath& row = rows[name.name];
    row.op = name.name;
    row.entry = handlers.count(name.name) > 0;
    const bool meta = op->hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
                      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
                      op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
    const bool cpu = meta || op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    row.meta = row.meta || meta;
    const bool inplace = name.name.size() > 1 && name.name.back() == '_';
    std::string why;
    if (!cpu) why = "no CPU kernel";
    if (op->schema().is_mutable() && !inplace) why = "writes into its arguments";
    // Refused only when every overload is.
    if (why.empty()) {
      taken.insert(name.name);
      row.refused.clear();
    } else if (!taken.count(name.name)) {
      row.refused = why;
    }
  }
  std::vector<AtenOpPath> out;
  for (auto& kv : rows) out.push_back(std::move(kv.second));
  return out;
}

bool LooksLikeTorchScript(const std::string& path) {
  if (absl::EndsWith(path, ".pt") || absl::EndsWith(path, ".pth") || absl::EndsWith(path, ".ts") ||
      absl::EndsWith(path, ".torchscript")) {
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

std::atomic<int64_t> archive_loads{0};

absl::StatusOr<torch::jit::Module> LoadArchive(const std::string& path, torch::jit::ExtraFilesMap* extra) {
  archive_loads.fetch_add(1);
  std::ifstream probe(path, std::ios::binary);
  if (!probe) return absl::NotFoundError(absl::StrCat("cannot open '", path, "': no such file or not readable"));
  try {
    if (extra != nullptr) return torch::jit::load(path, c10::nullopt, *extra);
    return torch::jit::load(path);
  } catch (const c10::OutOfMemoryError& e) {  // a memory cap (a rank's), not a bad archive
    return absl::ResourceExhaustedError(absl::StrCat("loading '", path, "': ", FirstLine(e.what())));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load '", path,
                                                   "' as a TorchScript archive (made by torch.jit.save): ",
                                                   FirstLine(e.what())));
  }
}

}  // namespace

absl::StatusOr<v1::Graph> ImportTorchScript(const std::string& path, const ImportOptions& options) {
  torch::jit::ExtraFilesMap extra{{"mapd_inputs.json", ""}};
  MAPD_ASSIGN_OR_RETURN(torch::jit::Module module, LoadArchive(path, &extra));
  std::vector<InputSpec> specs = options.inputs;
  if (specs.empty() && !extra["mapd_inputs.json"].empty()) {
    MAPD_ASSIGN_OR_RETURN(specs, ParseInputSpecsJson(extra["mapd_inputs.json"]));
  }
  std::string name = options.name;
  if (name.empty()) {
    name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    name = name.substr(0, name.find_last_of('.'));
  }
  try {
    import_internal::Importer importer(name, path);
    auto graph = importer.Run(module, specs);
    if (!graph.ok()) {
      std::vector<std::string> given;
      for (const auto& s : specs) given.push_back(s.ToString());
      return absl::Status(graph.status().code(),
                          absl::StrCat("importing '", path, "': ", graph.status().message(),
                                       given.empty() ? "" : absl::StrCat(" [input specs: ", absl::StrJoin(given, " "), "]")));
    }
    MAPD_RETURN_IF_ERROR(VerifyGraph(*graph));
    return graph;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("importing '", path, "': LibTorch error: ", FirstLine(e.what())));
  }
}

struct ArchiveScope::Archives {
  std::map<std::string, torch::jit::Module> modules;
};

namespace {
thread_local ArchiveScope::Archives* current_archives = nullptr;

// The archive at `path`: the scope's load when a scope is open, else a fresh one.
absl::StatusOr<torch::jit::Module> ScopedArchive(const std::string& path) {
  if (current_archives == nullptr) return LoadArchive(path, nullptr);
  auto it = current_archives->modules.find(path);
  if (it != current_archives->modules.end()) return it->second;
  MAPD_ASSIGN_OR_RETURN(torch::jit::Module module, LoadArchive(path, nullptr));
  current_archives->modules.emplace(path, module);
  return module;
}
}  // namespace

ArchiveScope::ArchiveScope() : archives_(current_archives) {
  if (archives_ == nullptr) {
    archives_ = new Archives();
    owner_ = true;
    current_archives = archives_;
  }
}

ArchiveScope::~ArchiveScope() {
  if (!owner_) return;
  current_archives = nullptr;
  delete archives_;
}

int64_t ArchiveLoads() { return archive_loads.load(); }

absl::StatusOr<TensorData> LoadParameterData(const v1::Parameter& param) {
  if (!param.has_data()) {
    return absl::FailedPreconditionError(absl::StrCat("parameter '", param.name(), "' has no data reference (zoo parameters are initialised from their init rule)"));
  }
  TensorData out;
  out.type = TensorType::FromProto(param.type());
  const auto& ref = param.data();
  if (ref.stored_dtype() != v1::DTYPE_UNSPECIFIED) out.type.dtype = ref.stored_dtype();
  if (!ref.inline_data().empty() || absl::StartsWith(ref.key(), "constant:")) {
    out.bytes.assign(ref.inline_data().begin(), ref.inline_data().end());
  } else {
    MAPD_ASSIGN_OR_RETURN(torch::jit::Module module, ScopedArchive(ref.source()));
    std::optional<at::Tensor> found;
    try {
      for (const auto& p : module.named_parameters(true)) {
        if (p.name == ref.key()) found = p.value;
      }
      for (const auto& b : module.named_buffers(true)) {
        if (!found && b.name == ref.key()) found = b.value;
      }
      if (!found) {
        // A plain tensor attribute: walk the dotted path.
        std::vector<std::string> parts = absl::StrSplit(ref.key(), '.');
        c10::IValue cur = module._ivalue();
        for (const auto& part : parts) {
          if (!cur.isObject() || !cur.toObject()->type()->hasAttribute(part)) break;
          cur = cur.toObject()->getAttr(part);
        }
        if (cur.isTensor()) found = cur.toTensor();
      }
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("reading '", ref.key(), "' from '", ref.source(), "': ", FirstLine(e.what())));
    }
    if (!found) {
      return absl::NotFoundError(absl::StrCat("'", ref.source(), "' has no tensor '", ref.key(), "'"));
    }
    at::Tensor t = found->detach().contiguous().cpu();
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    out.bytes.assign(p, p + t.nbytes());
  }
  if (static_cast<int64_t>(out.bytes.size()) != out.type.NumBytes()) {
    return absl::DataLossError(absl::StrCat("data of '", param.name(), "' has ", out.bytes.size(), " bytes, its type ",
                                            out.type.ToString(), " needs ", out.type.NumBytes()));
  }
  return out;
}

}  // namespace mapd
