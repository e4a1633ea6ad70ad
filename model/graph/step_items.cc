#include "model/graph/step_items.h"

#include "model/ir/tensor_type.h"

namespace mapd {

StepItems ItemsPerStep(const v1::Graph& graph) {
  const v1::GraphInput* tokens = nullptr;
  for (const auto& in : graph.inputs()) {
    if (in.role() == "tokens") tokens = &in;
  }
  for (const auto& in : graph.inputs()) {
    const DType d = in.type().dtype();
    if (tokens == nullptr && in.role().empty() && in.type().shape_size() == 2 && (d == v1::INT64 || d == v1::INT32)) tokens = &in;
  }
  if (tokens != nullptr) return {TensorType::FromProto(tokens->type()).NumElements(), "tokens"};
  if (graph.inputs_size() > 0 && graph.inputs(0).type().shape_size() > 0) return {graph.inputs(0).type().shape(0), "samples"};
  return {0, "samples"};
}

}  // namespace mapd
