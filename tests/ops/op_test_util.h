// Shorthands for op registry tests.
#ifndef MAPD_TESTS_OPS_OP_TEST_UTIL_H_
#define MAPD_TESTS_OPS_OP_TEST_UTIL_H_

#include <string>
#include <vector>

#include "model/ops/registry.h"

namespace mapd::testing {

inline TensorType F32(Shape s) { return {v1::FLOAT32, std::move(s)}; }
inline TensorType I64(Shape s) { return {v1::INT64, std::move(s)}; }
inline TensorType Bool(Shape s) { return {v1::BOOL, std::move(s)}; }

// Runs inference for one node; nullopt entries are absent optional inputs.
inline absl::StatusOr<std::vector<TensorType>> Infer(const std::string& op, const std::vector<std::optional<TensorType>>& in,
                                                     const Attrs& attrs = Attrs()) {
  static const std::string kNode = "n";
  std::vector<const TensorType*> ptrs;
  for (const auto& t : in) ptrs.push_back(t ? &*t : nullptr);
  return OpRegistry::Global().Infer(kNode, op, ptrs, attrs.map());
}

// The single output's type as a string, or "error: <message>".
inline std::string Out(const std::string& op, const std::vector<std::optional<TensorType>>& in,
                       const Attrs& attrs = Attrs()) {
  auto r = Infer(op, in, attrs);
  if (!r.ok()) return "error: " + std::string(r.status().message());
  std::string s;
  for (size_t i = 0; i < r->size(); ++i) s += (i ? " " : "") + (*r)[i].ToString();
  return s;
}

}  // namespace mapd::testing

#endif  // MAPD_TESTS_OPS_OP_TEST_UTIL_H_
