#include "model/import/generic_call.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/List.h>

#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<c10::OperatorHandle> FindAtenOperator(const std::string& schema) {
  static std::mutex mu;
  static std::map<std::string, c10::OperatorHandle>* cache = new std::map<std::string, c10::OperatorHandle>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(schema);
  if (it != cache->end()) return it->second;
  const size_t dot = schema.find('.');
  const std::string name = schema.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : schema.substr(dot + 1);
  auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!op.has_value()) {
    return absl::NotFoundError(absl::StrCat("LibTorch has no operator '", schema, "' (is the model from a newer PyTorch?)"));
  }
  cache->emplace(schema, *op);
  return *op;
}

bool DrawsRandom(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments()) {
    c10::TypePtr t = a.type();
    if (t->kind() == c10::TypeKind::OptionalType) t = t->containedTypes()[0];
    if (t->kind() == c10::TypeKind::GeneratorType) return true;
  }
  static const std::set<std::string> kDefaultGeneratorOps = {
      "aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
      "aten::rand_like", "aten::randn_like", "aten::randint_like", "aten::rrelu", "aten::native_dropout",
  };
  return kDefaultGeneratorOps.count(schema.name()) > 0;
}

namespace {

c10::IValue TensorsList(const std::vector<int64_t>& idx, const std::vector<at::Tensor>& inputs) {
  c10::List<at::Tensor> list;
  for (int64_t i : idx) list.push_back(inputs.at(i));
  return c10::IValue(list);
}

c10::IValue ArgValue(const GenericArg& a, const std::vector<at::Tensor>& inputs, c10::Device device,
                     const c10::optional<at::Generator>& generator) {
  using K = GenericArg::Kind;
  switch (a.kind) {
    case K::kTensor: return c10::IValue(inputs.at(a.ints[0]));
    case K::kTensorList: return TensorsList(a.ints, inputs);
    case K::kOptionalTensorList: {
      c10::List<c10::optional<at::Tensor>> list;
      for (int64_t i : a.ints) list.push_back(i < 0 ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(inputs.at(i)));
      return c10::IValue(list);
    }
    case K::kNone: return c10::IValue();
    case K::kInt: return c10::IValue(a.ints[0]);
    case K::kFloat: return c10::IValue(a.floats[0]);
    case K::kBool: return c10::IValue(a.ints[0] != 0);
    case K::kInts: return c10::IValue(a.ints);
    case K::kFloats: return c10::IValue(c10::List<double>(a.floats));
    case K::kBools: {
      c10::List<bool> list;
      for (int64_t b : a.ints) list.push_back(b != 0);
      return c10::IValue(list);
    }
    case K::kString: return c10::IValue(a.text);
    case K::kDevice: return c10::IValue(device);
    case K::kGenerator: return generator.has_value() ? c10::IValue(*generator) : c10::IValue();
  }
  return c10::IValue();
}

bool TakesGenerator(const std::vector<GenericArg>& args) {
  for (const auto& a : args) {
    if (a.kind == GenericArg::Kind::kGenerator) return true;
  }
  return false;
}

// The default CPU generator holds `generator`'s state while it lives, and gives it back after.
// Its mutex is taken only to copy states: the op takes it itself while it draws.
class DefaultGeneratorSwap {
 public:
  explicit DefaultGeneratorSwap(at::Generator generator)
      : generator_(std::move(generator)), default_(at::detail::getDefaultCPUGenerator()) {
    at::Tensor state;
    {
      std::lock_guard<std::mutex> g(generator_.mutex());
      state = generator_.get_state();
    }
    std::lock_guard<std::mutex> d(default_.mutex());
    saved_ = default_.get_state();
    default_.set_state(state);
  }
  ~DefaultGeneratorSwap() {
    at::Tensor state;
    {
      std::lock_guard<std::mutex> d(default_.mutex());
      state = default_.get_state();
      default_.set_state(saved_);
    }
    std::lock_guard<std::mutex> g(generator_.mutex());
    generator_.set_state(state);
  }

 private:
  at::Generator generator_;
  at::Generator default_;
  at::Tensor saved_;
};

}  // namespace

absl::StatusOr<std::vector<at::Tensor>> CallAten(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                                                 const std::vector<at::Tensor>& inputs, c10::Device device,
                                                 c10::optional<at::Generator> generator) {
  std::vector<c10::IValue> stack;
  stack.reserve(args.size());
  for (const auto& a : args) stack.push_back(ArgValue(a, inputs, device, generator));
  {
    std::unique_ptr<DefaultGeneratorSwap> swap;
    if (generator.has_value() && !TakesGenerator(args) && DrawsRandom(op.schema()) &&
        generator->device().type() == c10::DeviceType::CPU) {
      swap = std::make_unique<DefaultGeneratorSwap>(*generator);
    }
    op.callBoxed(&stack);
  }
  std::vector<at::Tensor> out;
  for (const c10::IValue& v : stack) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(op.schema().name(), " returns a ", v.tagKind(),
                                                     "; a generic node's outputs must be tensors"));
    }
  }
  return out;
}

}  // namespace mapd
