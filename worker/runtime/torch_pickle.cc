#include "worker/runtime/torch_pickle.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace mapd {

namespace {

struct Value;
using Ref = std::shared_ptr<Value>;

// What the stack machine builds: Python's None, bool, int, float, str, tuple, list, dict; a
// global (module.name); a storage (from a persistent id) and a tensor (a view of one).
struct Value {
  enum Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  Kind kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                           // str; a global's "module.name"; a storage's key
  std::vector<Ref> items;                  // tuple, list
  std::vector<std::pair<Ref, Ref>> dict;   // in insertion order
  v1::DType dtype = v1::DTYPE_UNSPECIFIED; // storage
  PickledTensor tensor;
};

Ref Make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

absl::StatusOr<v1::DType> StorageDType(const std::string& global) {
  static const std::map<std::string, v1::DType> kTypes = {
      {"torch.FloatStorage", v1::FLOAT32}, {"torch.DoubleStorage", v1::FLOAT64}, {"torch.HalfStorage", v1::FLOAT16},
      {"torch.BFloat16Storage", v1::BFLOAT16}, {"torch.LongStorage", v1::INT64}, {"torch.IntStorage", v1::INT32},
      {"torch.ShortStorage", v1::INT16}, {"torch.CharStorage", v1::INT8}, {"torch.ByteStorage", v1::UINT8},
      {"torch.BoolStorage", v1::BOOL}};
  auto it = kTypes.find(global);
  if (it == kTypes.end()) return absl::InvalidArgumentError(absl::StrCat("a storage of type ", global, " (not a supported dtype)"));
  return it->second;
}

class Machine {
 public:
  explicit Machine(absl::string_view in) : in_(in) {}

  absl::StatusOr<Ref> Run() {
    while (pos_ < in_.size()) {
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.empty()) return Bad("STOP on an empty stack");
        return stack_.back();
      }
      MAPD_RETURN_IF_ERROR(Step(op));
    }
    return Bad("the stream ends before STOP");
  }

 private:
  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80: return Skip(1);                                   // PROTO
      case 0x95: return Skip(8);                                   // FRAME
      case 'c': return Global();                                   // GLOBAL module\nname\n
      case 0x93: return StackGlobal();                             // STACK_GLOBAL
      case 'q': return Put(ReadUint(1));                           // BINPUT
      case 'r': return Put(ReadUint(4));                           // LONG_BINPUT
      case 0x94: return Put(memo_.size());                         // MEMOIZE
      case 'h': return Get(ReadUint(1));                           // BINGET
      case 'j': return Get(ReadUint(4));                           // LONG_BINGET
      case '(': marks_.push_back(stack_.size()); return absl::OkStatus();  // MARK
      case ')': return Push(Make(Value::kTuple));                  // EMPTY_TUPLE
      case ']': return Push(Make(Value::kList));                   // EMPTY_LIST
      case '}': return Push(Make(Value::kDict));                   // EMPTY_DICT
      case 't': return TupleOf(-1);                                // TUPLE
      case 0x85: case 0x86: case 0x87: return TupleOf(op - 0x84);  // TUPLE1..3
      case 'a': return Append(1);                                  // APPEND
      case 'e': return Append(-1);                                 // APPENDS
      case 's': return SetItems(1);                                // SETITEM
      case 'u': return SetItems(-1);                               // SETITEMS
      case 'X': return String(ReadUint(4));                        // BINUNICODE
      case 0x8c: return String(ReadUint(1));                       // SHORT_BINUNICODE
      case 0x8d: return String(ReadUint(8));                       // BINUNICODE8
      case 'J': return Int(static_cast<int32_t>(ReadUint(4)));     // BININT
      case 'K': return Int(ReadUint(1));                           // BININT1
      case 'M': return Int(ReadUint(2));                           // BININT2
      case 0x8a: return Long1();                                   // LONG1
      case 'G': return Float();                                    // BINFLOAT
      case 0x88: case 0x89: {                                      // NEWTRUE, NEWFALSE
        Ref b = Make(Value::kBool);
        b->i = op == 0x88;
        return Push(b);
      }
      case 'N': return Push(Make(Value::kNone));                   // NONE
      case 'R': return Reduce();                                   // REDUCE
      case 'b': return Build();                                    // BUILD
      case 'Q': return PersistentId();                             // BINPERSID
      default: return Bad(absl::StrCat("opcode 0x", absl::Hex(op), " (not one torch.save writes for a state dict)"));
    }
  }

  absl::Status Bad(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("unreadable pickle at byte ", pos_, ": ", what));
  }
  absl::Status Skip(size_t n) {
    if (in_.size() - pos_ < n) return Bad("truncated");
    pos_ += n;
    return absl::OkStatus();
  }
  // Little-endian unsigned of n bytes (0 past the end: Skip-style checks follow in the callers).
  uint64_t ReadUint(size_t n) {
    if (in_.size() - pos_ < n) {
      truncated_ = true;
      pos_ = in_.size();
      return 0;
    }
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  absl::Status Push(Ref v) {
    if (truncated_) return Bad("truncated");
    stack_.push_back(std::move(v));
    return absl::OkStatus();
  }
  absl::StatusOr<Ref> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return Bad("pop past a mark or an empty stack");
    Ref v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // The values pushed since the last MARK (which is dropped).
  absl::StatusOr<std::vector<Ref>> PopToMark() {
    if (marks_.empty()) return Bad("no MARK");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Ref> out(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return out;
  }
  absl::Status Put(uint64_t index) {
    if (truncated_) return Bad("truncated");
    if (stack_.empty()) return Bad("memo of an empty stack");
    memo_[index] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (truncated_ || it == memo_.end()) return Bad(absl::StrCat("memo ", index, " was never set"));
    return Push(it->second);
  }
  absl::Status Global() {
    const size_t a = in_.find('\n', pos_);
    const size_t b = a == absl::string_view::npos ? a : in_.find('\n', a + 1);
    if (b == absl::string_view::npos) return Bad("truncated GLOBAL");
    Ref g = Make(Value::kGlobal);
    g->s = absl::StrCat(in_.substr(pos_, a - pos_), ".", in_.substr(a + 1, b - a - 1));
    pos_ = b + 1;
    return Push(g);
  }
  absl::Status StackGlobal() {
    MAPD_ASSIGN_OR_RETURN(Ref name, Pop());
    MAPD_ASSIGN_OR_RETURN(Ref module, Pop());
    if (name->kind != Value::kString || module->kind != Value::kString) return Bad("STACK_GLOBAL of no strings");
    Ref g = Make(Value::kGlobal);
    g->s = absl::StrCat(module->s, ".", name->s);
    return Push(g);
  }
  // The last `count` values in the order pushed, or (count < 0) those since the last MARK.
  absl::StatusOr<std::vector<Ref>> PopItems(int count) {
    if (count < 0) return PopToMark();
    std::vector<Ref> items(count);
    for (int k = count - 1; k >= 0; --k) {
      MAPD_ASSIGN_OR_RETURN(items[k], Pop());
    }
    return items;
  }
  // A tuple of the last n values (n < 0: those since the last MARK).
  absl::Status TupleOf(int n) {
    Ref t = Make(Value::kTuple);
    MAPD_ASSIGN_OR_RETURN(t->items, PopItems(n));
    return Push(t);
  }
  absl::Status Append(int n) {
    MAPD_ASSIGN_OR_RETURN(std::vector<Ref> items, PopItems(n));
    if (stack_.empty() || stack_.back()->kind != Value::kList) return Bad("APPEND to no list");
    for (Ref& v : items) stack_.back()->items.push_back(v);
    return absl::OkStatus();
  }
  absl::Status SetItems(int pairs) {
    MAPD_ASSIGN_OR_RETURN(std::vector<Ref> items, PopItems(pairs < 0 ? -1 : 2 * pairs));
    if (stack_.empty() || stack_.back()->kind != Value::kDict || items.size() % 2 != 0) return Bad("SETITEMS to no dict");
    for (size_t k = 0; k < items.size(); k += 2) stack_.back()->dict.emplace_back(items[k], items[k + 1]);
    return absl::OkStatus();
  }
  absl::Status String(uint64_t n) {
    if (truncated_ || in_.size() - pos_ < n) return Bad("truncated string");
    Ref s = Make(Value::kString);
    s->s = std::string(in_.substr(pos_, n));
    pos_ += n;
    return Push(s);
  }
  absl::Status Int(int64_t v) {
    Ref i = Make(Value::kInt);
    i->i = v;
    return Push(i);
  }
  absl::Status Long1() {
    const uint64_t n = ReadUint(1);
    if (n > 8) return Bad("an integer over 64 bits");
    uint64_t v = ReadUint(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return Int(static_cast<int64_t>(v));
  }
  absl::Status Float() {
    if (in_.size() - pos_ < 8) return Bad("truncated float");
    uint64_t bits = 0;
    for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(in_[pos_ + k]);  // big-endian
    pos_ += 8;
    Ref f = Make(Value::kFloat);
    std::memcpy(&f->f, &bits, sizeof(double));
    return Push(f);
  }
  // ('storage', torch.XStorage, key, location, numel)
  absl::Status PersistentId() {
    MAPD_ASSIGN_OR_RETURN(Ref pid, Pop());
    if (pid->kind != Value::kTuple || pid->items.size() < 3 || pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Value::kGlobal || pid->items[2]->kind != Value::kString) {
      return Bad("a persistent id that names no storage");
    }
    Ref storage = Make(Value::kStorage);
    MAPD_ASSIGN_OR_RETURN(storage->dtype, StorageDType(pid->items[1]->s));
    storage->s = pid->items[2]->s;
    return Push(storage);
  }
  absl::Status Reduce() {
    MAPD_ASSIGN_OR_RETURN(Ref args, Pop());
    MAPD_ASSIGN_OR_RETURN(Ref callable, Pop());
    if (callable->kind != Value::kGlobal || args->kind != Value::kTuple) return Bad("REDUCE of no global");
    const std::string& f = callable->s;
    if (f == "collections.OrderedDict") return Push(Make(Value::kDict));
    if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Value::kTensor) return Bad("a parameter of no tensor");
      return Push(args->items[0]);
    }
    if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") return RebuildTensor(*args);
    return Bad(absl::StrCat("a call of ", f, " (a state dict holds tensors only)"));
  }
  // (storage, storage_offset, size, stride, ...)
  absl::Status RebuildTensor(const Value& args) {
    if (args.items.size() < 4 || args.items[0]->kind != Value::kStorage || args.items[1]->kind != Value::kInt ||
        args.items[2]->kind != Value::kTuple || args.items[3]->kind != Value::kTuple) {
      return Bad("a tensor rebuilt from other arguments than (storage, offset, size, stride)");
    }
    Ref t = Make(Value::kTensor);
    t->tensor.storage_key = args.items[0]->s;
    t->tensor.dtype = args.items[0]->dtype;
    t->tensor.storage_offset = args.items[1]->i;
    for (const Ref& d : args.items[2]->items) t->tensor.shape.push_back(d->i);
    for (const Ref& d : args.items[3]->items) t->tensor.stride.push_back(d->i);
    return Push(t);
  }
  // An OrderedDict's state (its _metadata) and a tensor's are not needed.
  absl::Status Build() {
    MAPD_ASSIGN_OR_RETURN(Ref state, Pop());
    (void)state;
    if (stack_.empty()) return Bad("BUILD on an empty stack");
    return absl::OkStatus();
  }

  absl::string_view in_;
  size_t pos_ = 0;
  bool truncated_ = false;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Ref> memo_;
};

const Value* Entry(const Value& dict, const std::string& key) {
  for (const auto& [k, v] : dict.dict) {
    if (k->kind == Value::kString && k->s == key) return v.get();
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<PickledTensor>> ParseStateDictPickle(absl::string_view pickle) {
  Machine machine(pickle);
  MAPD_ASSIGN_OR_RETURN(Ref top, machine.Run());
  if (top->kind != Value::kDict) return absl::InvalidArgumentError("the file holds no dict of tensors (a state dict)");
  const Value* dict = top.get();
  for (const char* key : {"model", "state_dict"}) {
    const Value* inner = Entry(*top, key);
    if (inner != nullptr && inner->kind == Value::kDict) dict = inner;
  }
  std::vector<PickledTensor> out;
  for (const auto& [k, v] : dict->dict) {
    if (k->kind != Value::kString) return absl::InvalidArgumentError("the state dict has a key that is no string");
    if (v->kind != Value::kTensor) {
      return absl::InvalidArgumentError(absl::StrCat("the state dict's '", k->s, "' is no tensor"));
    }
    out.push_back(v->tensor);
    out.back().name = k->s;
  }
  return out;
}

}  // namespace mapd
