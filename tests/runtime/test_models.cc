#include "tests/runtime/test_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/ir/dtype.h"

namespace mapd {
namespace testing_util {

namespace fs = std::filesystem;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Models {
  std::string dir;
  nlohmann::json expected;
  bool ok = false;
  ~Models() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

Models& Get() {
  static Models* m = [] {
    auto* models = new Models();
    char tmpl[] = "/tmp/mapd_runtime_test_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return models;
    models->dir = tmpl;
    const std::string cmd = std::string("/usr/bin/python3 ") + MAPD_SOURCE_DIR + "/tests/import/models/make_models.py " +
                            models->dir + " --without-families > " + models->dir + "/make.log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "make_models.py failed:\n" << ReadFile(models->dir + "/make.log");
      return models;
    }
    models->expected = nlohmann::json::parse(ReadFile(models->dir + "/expected.json"));
    models->ok = true;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(Get().dir, ec);
    });
    return models;
  }();
  return *m;
}

}  // namespace

const std::string& ModelsDir() {
  static const std::string kEmpty;
  Models& m = Get();
  return m.ok ? m.dir : kEmpty;
}

const nlohmann::json& Expected() { return Get().expected; }

std::vector<InputSpec> SpecsFor(const std::string& file) {
  std::vector<InputSpec> specs;
  for (const auto& in : Expected()[file]["inputs"]) {
    InputSpec s;
    s.name = in["name"].get<std::string>();
    s.type.dtype = *ParseDType(in["dtype"].get<std::string>());
    s.type.shape = in["shape"].get<std::vector<int64_t>>();
    specs.push_back(s);
  }
  return specs;
}

std::string RepositoryText() {
  std::vector<std::string> files = {std::string(MAPD_SOURCE_DIR) + "/README.md"};
  std::vector<std::string> docs;
  for (const auto& e : fs::directory_iterator(std::string(MAPD_SOURCE_DIR) + "/docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path().string());
  }
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  std::string text;
  for (const auto& f : files) text += ReadFile(f);
  return text;
}

}  // namespace testing_util
}  // namespace mapd
