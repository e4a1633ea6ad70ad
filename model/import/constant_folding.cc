// Constant folding at import (docs/importer.md "Constant folding"): what a forward computes
// from no graph input, no parameter or buffer and no random draw — causal and sliding-window
// masks, rotary and position tables, index vectors — is evaluated once with LibTorch, as
// torch.jit.freeze does, and enters the graph as a CONSTANT parameter where an emitted op
// reads it. Such ops need no handler.
//
// Two halves: before interpreting, a taint pass over the inlined graph (UnsupportedOps) marks
// the values that depend on inputs, state or randomness, so that only ops on those are
// reported as unsupported; while interpreting, TryFold evaluates a node whose arguments are
// all known, and Materialise turns a known tensor into a graph constant when it meets the graph.
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>

#include <unordered_set>

#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {

namespace {

// A folded tensor larger than this is not folded where a handler can emit the op instead
// (a batch-sized zeros() stays a graph node), and is refused where none can.
constexpr int64_t kMaxFoldedTensorBytes = int64_t{64} << 20;
// Inline data of all materialised constants of one graph: the graph crosses process
// boundaries as a proto, so a model whose constants are larger must register them as buffers
// (which are read from the archive instead).
constexpr int64_t kMaxInlineConstantBytes = int64_t{256} << 20;

std::string KindOf(torch::jit::Node* n) { return n->kind().toQualString(); }

bool HasTensorType(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& c : t->containedTypes()) {
    if (HasTensorType(c)) return true;
  }
  return false;
}

// Ops whose result is known from their input's type alone (a tensor's shape is static).
bool IsShapeQuery(const std::string& kind) {
  static const std::unordered_set<std::string> kinds = {
      "aten::size",  "aten::dim",        "aten::numel",  "aten::len",           "prim::dtype",
      "prim::device", "aten::is_floating_point", "prim::requires_grad", "prim::is_cuda",
      "aten::__is__", "aten::__isnot__",
  };
  return kinds.count(kind) > 0;
}

}  // namespace

bool IsTypeOnlyOp(const std::string& kind) {
  // new_*(x, size) take only x's dtype; empty_like(x) has no handler. zeros_like(x) and its
  // kin stay graph nodes (their handlers): their result has x's shape, often the batch's, which
  // a constant would replicate rather than split.
  static const std::unordered_set<std::string> kinds = {
      "aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::empty_like",
  };
  return kinds.count(kind) > 0;
}

absl::StatusOr<AValue> Importer::TypePlaceholder(torch::jit::Node* n, const AValue& v) const {
  const TensorType& t = TypeOf(v);
  if (t.NumBytes() > kMaxFoldedTensorBytes) return v;  // made by its handler instead
  return AValue::ConstTensor(at::empty(t.shape, at::TensorOptions().dtype(ToScalarType(t.dtype))));
}

namespace {

// The taint pass: values that depend on a graph input, a parameter or buffer, or a random draw.
class DynamicValues {
 public:
  DynamicValues(const std::unordered_map<const c10::TensorImpl*, std::string>& state) : state_(state) {}

  void Run(torch::jit::Graph& g, const c10::IValue& self) {
    objects_[g.inputs()[0]] = self;
    for (size_t i = 1; i < g.inputs().size(); ++i) dynamic_.insert(g.inputs()[i]);
    // Loops carry values from one trip to the next: repeat until nothing changes.
    size_t before = 0;
    do {
      before = dynamic_.size();
      Visit(g.block());
    } while (dynamic_.size() != before);
  }

  bool IsDynamic(const torch::jit::Value* v) const { return dynamic_.count(v) > 0; }

 private:
  bool AnyDynamic(torch::jit::ArrayRef<torch::jit::Value*> values) const {
    for (const torch::jit::Value* v : values) {
      if (IsDynamic(v)) return true;
    }
    return false;
  }

  void MarkAll(torch::jit::ArrayRef<torch::jit::Value*> values) {
    for (const torch::jit::Value* v : values) dynamic_.insert(v);
  }

  void VisitGetAttr(torch::jit::Node* n) {
    auto obj = objects_.find(n->input(0));
    if (obj == objects_.end() || !obj->second.isObject()) {
      MarkAll(n->outputs());  // an object not followed: assume state
      return;
    }
    const std::string name = n->s(c10::attr::name);
    const auto& object = obj->second.toObject();
    if (!object->type()->hasAttribute(name)) return;
    const c10::IValue attr = object->getAttr(name);
    if (attr.isObject()) objects_[n->output()] = attr;
    if (attr.isTensor() && state_.count(attr.toTensor().unsafeGetTensorImpl())) dynamic_.insert(n->output());
  }

  void Visit(torch::jit::Block* block) {
    for (torch::jit::Node* n : block->nodes()) {
      const std::string kind = KindOf(n);
      if (kind == "prim::GetAttr") {
        VisitGetAttr(n);
        continue;
      }
      if (kind == "prim::Loop") {
        // Body inputs: the trip counter, then the carried values.
        torch::jit::Block* body = n->blocks()[0];
        for (size_t i = 1; i < body->inputs().size(); ++i) {
          if (IsDynamic(n->inputs()[i + 1]) || IsDynamic(body->outputs()[i])) dynamic_.insert(body->inputs()[i]);
        }
      }
      bool dynamic = IsRandomOp(kind);
      if (IsTypeOnlyOp(kind)) {
        dynamic |= AnyDynamic(n->inputs().slice(1));  // argument 0 gives only a shape and dtype
      } else if (!IsShapeQuery(kind)) {
        dynamic |= AnyDynamic(n->inputs());
      }
      for (torch::jit::Block* b : n->blocks()) {
        Visit(b);
        dynamic |= AnyDynamic(b->outputs());
      }
      // A call not inlined may read state through its module argument.
      dynamic |= kind == "prim::CallMethod" || kind == "prim::CallFunction";
      if (dynamic) MarkAll(n->outputs());
    }
  }

  const std::unordered_map<const c10::TensorImpl*, std::string>& state_;
  std::unordered_set<const torch::jit::Value*> dynamic_;
  std::unordered_map<const torch::jit::Value*, c10::IValue> objects_;
};

void CountUnsupported(torch::jit::Block* block, const DynamicValues& dynamic, std::map<std::string, int>* counts) {
  for (torch::jit::Node* n : block->nodes()) {
    for (torch::jit::Block* b : n->blocks()) CountUnsupported(b, dynamic, counts);
    const std::string kind = KindOf(n);
    // aten ops without a handler go by the generic path, which names its own refusals.
    if (IsInterpreterKind(kind) || AtenHandlers().count(kind) || kind.rfind("aten::", 0) == 0) continue;
    bool tensor_out = false, depends = IsRandomOp(kind);
    for (torch::jit::Value* o : n->outputs()) {
      tensor_out |= HasTensorType(o->type());
      depends |= dynamic.IsDynamic(o);
    }
    if (!tensor_out || !depends) continue;  // folded at import time
    ++(*counts)[kind];
  }
}

int64_t TensorBytes(const c10::IValue& iv) {
  if (iv.isTensor()) return static_cast<int64_t>(iv.toTensor().nbytes());
  int64_t total = 0;
  if (iv.isList()) {
    for (const auto& e : iv.toListRef()) total += TensorBytes(e);
  } else if (iv.isTuple()) {
    for (const auto& e : iv.toTupleRef().elements()) total += TensorBytes(e);
  }
  return total;
}

bool HasConstTensor(const AValue& v) {
  if (v.kind == AValue::Kind::kConstTensor) return true;
  for (const auto& it : v.items) {
    if (HasConstTensor(it)) return true;
  }
  return false;
}

}  // namespace

bool IsRandomOp(const std::string& kind) {
  const std::string op = kind.substr(kind.find("::") == std::string::npos ? 0 : kind.find("::") + 2);
  for (const char* word : {"rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "poisson",
                           "exponential", "geometric", "cauchy", "rrelu"}) {
    if (op.find(word) != std::string::npos) return true;
  }
  return false;
}

std::map<std::string, int> UnsupportedOps(torch::jit::Graph& inlined, const c10::IValue& self,
                                          const std::unordered_map<const c10::TensorImpl*, std::string>& state) {
  DynamicValues dynamic(state);
  dynamic.Run(inlined, self);
  std::map<std::string, int> counts;
  CountUnsupported(inlined.block(), dynamic, &counts);
  return counts;
}

std::optional<c10::IValue> ToIValue(const AValue& v) {
  switch (v.kind) {
    case AValue::Kind::kNone: return c10::IValue();
    case AValue::Kind::kConstTensor: return v.constant;
    case AValue::Kind::kConst:
      if (v.scalar_tensor) {
        if (v.constant.isInt()) return c10::IValue(at::scalar_tensor(v.constant.toInt(), at::kLong));
        if (v.constant.isDouble()) return c10::IValue(at::scalar_tensor(v.constant.toDouble(), at::kDouble));
        if (v.constant.isBool()) return c10::IValue(at::scalar_tensor(v.constant.toBool(), at::kBool));
      }
      return v.constant;
    case AValue::Kind::kList: {
      bool all_int = true, all_double = true, all_bool = true, all_tensor = true, tensor_or_none = true;
      std::vector<c10::IValue> items;
      for (const auto& it : v.items) {
        auto iv = ToIValue(it);
        if (!iv) return std::nullopt;
        all_int &= iv->isInt();
        all_double &= iv->isDouble();
        all_bool &= iv->isBool();
        all_tensor &= iv->isTensor();
        tensor_or_none &= iv->isTensor() || iv->isNone();
        items.push_back(*iv);
      }
      if (items.empty()) return c10::IValue(c10::List<int64_t>());
      if (all_int) {
        c10::List<int64_t> l;
        for (auto& i : items) l.push_back(i.toInt());
        return c10::IValue(l);
      }
      if (all_double) {
        c10::List<double> l;
        for (auto& i : items) l.push_back(i.toDouble());
        return c10::IValue(l);
      }
      if (all_bool) {
        c10::List<bool> l;
        for (auto& i : items) l.push_back(i.toBool());
        return c10::IValue(l);
      }
      // Tensor[] (cat, stack) and Tensor?[] (index) arguments need typed lists.
      if (all_tensor) {
        c10::List<at::Tensor> l;
        for (auto& i : items) l.push_back(i.toTensor());
        return c10::IValue(l);
      }
      if (tensor_or_none) {
        c10::List<c10::optional<at::Tensor>> l;
        for (auto& i : items) l.push_back(i.isNone() ? c10::optional<at::Tensor>() : i.toTensor());
        return c10::IValue(l);
      }
      c10::impl::GenericList l(c10::AnyType::get());
      for (auto& i : items) l.push_back(i);
      return c10::IValue(l);
    }
    case AValue::Kind::kTuple: {
      std::vector<c10::IValue> items;
      for (const auto& it : v.items) {
        auto iv = ToIValue(it);
        if (!iv) return std::nullopt;
        items.push_back(*iv);
      }
      return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
    }
    default: return std::nullopt;
  }
}

std::optional<AValue> FromIValue(const c10::IValue& iv) {
  if (iv.isTensor()) {
    const at::Tensor& t = iv.toTensor();
    if (t.dim() != 0) return AValue::ConstTensor(t);
    AValue v;
    if (t.is_floating_point()) v = AValue::Const(t.item<double>());
    else if (t.scalar_type() == at::kBool) v = AValue::Const(t.item<bool>());
    else v = AValue::Const(t.item<int64_t>());
    v.scalar_tensor = true;
    return v;
  }
  if (iv.isTuple()) {
    AValue v;
    v.kind = AValue::Kind::kTuple;
    for (const auto& e : iv.toTupleRef().elements()) {
      auto a = FromIValue(e);
      if (!a) return std::nullopt;
      v.items.push_back(*a);
    }
    return v;
  }
  if (iv.isNone()) return AValue::None();
  return AValue::Const(iv);
}

absl::StatusOr<bool> Importer::TryFold(torch::jit::Node* n, const std::vector<AValue>& args) {
  torch::jit::Stack stack;
  for (size_t i = 0; i < args.size(); ++i) {
    auto iv = ToIValue(args[i]);
    if (!iv) {
      return Error(n, absl::StrCat("argument ", i,
                                   " depends on tensor data, which is not known at import time; MAP needs "
                                   "shapes and control flow that depend only on input shapes"));
    }
    stack.push_back(*iv);
  }
  try {
    torch::jit::Operation op = n->getOperation();
    op(stack);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return Error(n, absl::StrCat("evaluating a constant expression failed: ", what));
  }
  if (stack.size() != n->outputs().size()) return Error(n, "constant evaluation gave an unexpected number of values");
  for (const c10::IValue& out : stack) {
    const int64_t bytes = TensorBytes(out);
    if (bytes <= kMaxFoldedTensorBytes) continue;
    bool const_tensor_arg = false;
    for (const auto& a : args) const_tensor_arg |= HasConstTensor(a);
    if (AtenHandlers().count(KindOf(n)) && !const_tensor_arg) return false;
    return Error(n, absl::StrCat("folding this input-independent op gives a constant of ", bytes,
                                 " bytes, more than the ", kMaxFoldedTensorBytes,
                                 " MAP folds; compute it from an input or register it as a buffer"));
  }
  for (size_t i = 0; i < stack.size(); ++i) {
    auto v = FromIValue(stack[i]);
    if (!v) return Error(n, "constant evaluation produced a value MAP cannot represent");
    Bind(n->outputs()[i], *v);
  }
  return true;
}

absl::Status Importer::FoldConstant(torch::jit::Node* n, const std::vector<AValue>& args) {
  MAPD_ASSIGN_OR_RETURN(bool folded, TryFold(n, args));
  if (!folded) return Error(n, "the constant is too large to fold");
  return absl::OkStatus();
}

absl::StatusOr<std::string> Importer::AddConstantParameter(torch::jit::Node* n, const at::Tensor& tensor,
                                                           const std::string& attribute_path) {
  auto dtype = CheckedDType(tensor.scalar_type());
  if (!dtype.ok()) return Error(n, absl::StrCat("a constant tensor read here: ", dtype.status().message()));
  const at::Tensor t = tensor.detach().contiguous().cpu();
  v1::Parameter p;
  *p.mutable_type() = TensorType{*dtype, Shape(t.sizes().begin(), t.sizes().end())}.ToProto();
  p.set_kind(v1::Parameter::CONSTANT);
  p.mutable_data()->set_source(source_path_);
  if (!attribute_path.empty()) {
    p.set_name(attribute_path);
    p.mutable_data()->set_key(attribute_path);
  } else {
    inline_constant_bytes_ += static_cast<int64_t>(t.nbytes());
    if (inline_constant_bytes_ > kMaxInlineConstantBytes) {
      return Error(n, absl::StrCat("the model's input-independent constants exceed ", kMaxInlineConstantBytes,
                                   " bytes; register the large ones as buffers"));
    }
    p.set_name(absl::StrCat("constant_", num_constants_));
    p.mutable_data()->set_key(absl::StrCat("constant:", num_constants_));
    p.mutable_data()->set_inline_data(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
    ++num_constants_;
  }
  const std::string name = p.name();
  builder_.AddParameter(std::move(p));
  MAPD_RETURN_IF_ERROR(builder_.status());
  param_kind_[name] = v1::Parameter::CONSTANT;
  return name;
}

absl::StatusOr<AValue> Importer::Materialise(torch::jit::Node* n, const AValue& v) {
  if (v.kind == AValue::Kind::kList || v.kind == AValue::Kind::kTuple) {
    AValue out = v;
    for (auto& it : out.items) {
      MAPD_ASSIGN_OR_RETURN(it, Materialise(n, it));
    }
    return out;
  }
  if (v.kind == AValue::Kind::kConst && v.constant.isList()) {
    // A folded list that holds tensors (unbind, split of a constant).
    bool tensors = false;
    for (const auto& e : v.constant.toListRef()) tensors |= e.isTensor();
    if (!tensors) return v;
    AValue out;
    out.kind = AValue::Kind::kList;
    for (const auto& e : v.constant.toListRef()) {
      auto item = FromIValue(e);
      if (!item) return Error(n, "a folded list holds a value MAP cannot represent");
      MAPD_ASSIGN_OR_RETURN(AValue m, Materialise(n, *item));
      out.items.push_back(std::move(m));
    }
    return out;
  }
  if (v.kind != AValue::Kind::kConstTensor) return v;
  const at::Tensor& t = v.constant.toTensor();
  const uint32_t version = t.is_inference() ? 0 : t._version();
  auto it = materialised_.find(t.unsafeGetTensorImpl());
  if (it != materialised_.end() && it->second.first == version) return AValue::Tensor(it->second.second);
  // An attribute modified in place since it was read is no longer what the archive holds.
  const bool unmodified_attribute = !v.path.empty() && version == 0 && !param_kind_.count(v.path);
  MAPD_ASSIGN_OR_RETURN(std::string name, AddConstantParameter(n, t, unmodified_attribute ? v.path : ""));
  materialised_[t.unsafeGetTensorImpl()] = {version, name};
  materialised_tensors_.push_back(t);
  return AValue::Tensor(name);
}

}  // namespace import_internal
}  // namespace mapd
