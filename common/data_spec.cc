#include "common/data_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mapd {

namespace {

constexpr size_t kMaxFileChars = 1024;

absl::Status Bad(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("data '", spec.substr(0, 200), "': ", why,
                                                 "; give synthetic, text:FILE (bytes as tokens), tokens:FILE (uint16 ids) "
                                                 "or npy:INPUTS.npy[,TARGETS.npy]"));
}

}  // namespace

std::string DataSpec::ToString() const { return files.empty() ? kind : absl::StrCat(kind, ":", JoinedFiles()); }

std::string DataSpec::JoinedFiles() const { return absl::StrJoin(files, ","); }

std::vector<std::string> SplitDataFiles(absl::string_view kind, absl::string_view joined) {
  if (joined.empty()) return {};
  if (kind == "npy") return absl::StrSplit(joined, ',');
  return {std::string(joined)};
}

absl::StatusOr<DataSpec> ParseDataSpec(absl::string_view spec) {
  DataSpec out;
  const size_t colon = spec.find(':');
  out.kind = std::string(spec.substr(0, colon));
  const absl::string_view files = colon == absl::string_view::npos ? absl::string_view() : spec.substr(colon + 1);
  if (out.kind == "synthetic") {
    if (colon != absl::string_view::npos) return Bad(spec, "synthetic data reads no file");
    return out;
  }
  if (out.kind != "text" && out.kind != "tokens" && out.kind != "npy") return Bad(spec, "unknown kind");
  out.files = SplitDataFiles(out.kind, files);
  if (out.files.empty()) return Bad(spec, absl::StrCat("give the file as ", out.kind, ":FILE"));
  if (out.files.size() > (out.kind == "npy" ? 2u : 1u)) return Bad(spec, "too many files");
  for (const std::string& f : out.files) {
    if (f.empty() || f.size() > kMaxFileChars || f.find('\0') != std::string::npos) {
      return Bad(spec, absl::StrCat("a file name must be 1 to ", kMaxFileChars, " characters without NUL"));
    }
  }
  return out;
}

}  // namespace mapd
