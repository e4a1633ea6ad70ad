// Shared by the runtime tests: the importer's test models, traced once per process by
// tests/import/models/make_models.py into a temporary directory, and small graph helpers.
#ifndef MAPD_TESTS_RUNTIME_TEST_MODELS_H_
#define MAPD_TESTS_RUNTIME_TEST_MODELS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/import/input_spec.h"

namespace mapd {
namespace testing_util {

// The directory holding the traced .pt files and expected.json (made on first use; removed at
// exit). Fails the current test and returns "" if make_models.py fails.
const std::string& ModelsDir();
// expected.json.
const nlohmann::json& Expected();
// Input specs of `file` as PyTorch reported them.
std::vector<InputSpec> SpecsFor(const std::string& file);
// The repository's README.md and docs/*.md concatenated (byte-level training text).
std::string RepositoryText();

}  // namespace testing_util
}  // namespace mapd

#endif  // MAPD_TESTS_RUNTIME_TEST_MODELS_H_
