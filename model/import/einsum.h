// torch.einsum equations, parsed for the importer's lowering to permute / reshape / sum / bmm
// (aten_handlers.cc). Torch-free.
#ifndef MAPD_MODEL_IMPORT_EINSUM_H_
#define MAPD_MODEL_IMPORT_EINSUM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mapd {

// One label per dimension of every operand and of the output; "..." is expanded into labels of
// its own (upper-case letters are users' too, so digits and punctuation stand for the
// ellipsis's dimensions), the implicit output ("ij,jk") is the labels used once, sorted, after
// the ellipsis's — as torch.einsum defines it.
struct EinsumEquation {
  std::vector<std::string> operands;
  std::string output;
};

// INVALID_ARGUMENT naming the equation for a malformed one, or one whose operand has a
// different rank than its labels, or a label repeated within one operand (diagonals).
absl::StatusOr<EinsumEquation> ParseEinsum(const std::string& equation, const std::vector<int>& ranks);

}  // namespace mapd

#endif  // MAPD_MODEL_IMPORT_EINSUM_H_
