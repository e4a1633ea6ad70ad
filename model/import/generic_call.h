// Calling an ATen operator by its schema name with a boxed stack (c10::Dispatcher): how a
// generic node (model/ops/generic_op.h) runs, at import (measured on meta or small real tensors)
// and in the runtime (worker/runtime/exec_table_generic.cc). Autograd differentiates the call
// like any other. Includes LibTorch.
#ifndef MAPD_MODEL_IMPORT_GENERIC_CALL_H_
#define MAPD_MODEL_IMPORT_GENERIC_CALL_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/ops/generic_op.h"

namespace mapd {

// The operator "aten::name" or "aten::name.overload" (cached). NOT_FOUND naming it.
absl::StatusOr<c10::OperatorHandle> FindAtenOperator(const std::string& schema);

// Whether the operator draws random numbers: it takes a Generator, or is one of ATen's random
// ops that draw from the default generator.
bool DrawsRandom(const c10::FunctionSchema& schema);

// Runs `op` on `args` (tensors from `inputs`, the device and generator filled in) and returns its
// tensor outputs in order (a returned Tensor[] contributes each item). A random op draws from
// `generator` when given (by its Generator argument, or, for ops that take none, from the default
// CPU generator set to its state for the call and its state copied back). Throws LibTorch errors
// (std::exception); INVALID_ARGUMENT for outputs that are not tensors.
absl::StatusOr<std::vector<at::Tensor>> CallAten(const c10::OperatorHandle& op, const std::vector<GenericArg>& args,
                                                 const std::vector<at::Tensor>& inputs, c10::Device device,
                                                 c10::optional<at::Generator> generator);

}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_GENERIC_CALL_H_
