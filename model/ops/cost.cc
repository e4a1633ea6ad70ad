#include "model/ops/cost.h"

namespace mapd {

int64_t IoBytes(const CostContext& c) {
  int64_t b = 0;
  for (int i = 0; i < c.op.num_inputs(); ++i) {
    if (c.op.has_input(i)) b += c.op.input(i).NumBytes();
  }
  for (const auto& o : c.outputs) b += o.NumBytes();
  return b;
}

OpCost CopyCost(const CostContext& c) {
  OpCost cost;
  cost.bytes = IoBytes(c);
  cost.grad_flops.assign(c.op.num_inputs(), 0.0);
  return cost;
}

CostFn ElementwiseCost(double per_elem, double grad_per_elem) {
  return [per_elem, grad_per_elem](const CostContext& c) {
    OpCost cost;
    cost.vector_arithmetic = true;
    int64_t n = 0;
    for (const auto& o : c.outputs) n += o.NumElements();
    cost.flops = per_elem * static_cast<double>(n);
    cost.bytes = IoBytes(c);
    cost.grad_flops.assign(c.op.num_inputs(), 0.0);
    for (int i = 0; i < c.op.num_inputs(); ++i) {
      if (c.input_requires_grad(i)) cost.grad_flops[i] = grad_per_elem * static_cast<double>(n);
    }
    return cost;
  };
}

CostFn FreeCost() {
  return [](const CostContext& c) {
    OpCost cost;
    cost.kernels = 0;
    cost.grad_flops.assign(c.op.num_inputs(), 0.0);
    return cost;
  };
}

SavedFn Saves(std::vector<int> inputs, std::vector<int> outputs) {
  return [inputs, outputs](const CostContext& c) {
    SavedSpec s;
    if (!c.any_requires_grad()) return s;
    for (int i : inputs) {
      if (c.op.has_input(i)) s.inputs.push_back(i);
    }
    s.outputs = outputs;
    return s;
  };
}

SavedFn SavesNothing() {
  return [](const CostContext&) { return SavedSpec(); };
}

CostFn ReduceCost() {
  return [](const CostContext& c) {
    OpCost cost;
    const double n = static_cast<double>(c.op.input(0).NumElements());
    cost.flops = n;
    cost.grad_flops = {c.input_requires_grad(0) ? n : 0};
    cost.bytes = IoBytes(c);
    return cost;
  };
}

}  // namespace mapd
