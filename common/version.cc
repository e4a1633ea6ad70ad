#include "common/version.h"

#include "absl/strings/str_cat.h"

#ifndef MAPD_VERSION
#define MAPD_VERSION "unknown"
#endif
#ifndef MAPD_TORCH_VERSION
#define MAPD_TORCH_VERSION "unknown"
#endif
#ifndef MAPD_REVISION
#define MAPD_REVISION "unknown"
#endif

namespace mapd {

const char* MapdVersion() { return MAPD_VERSION; }
const char* MapdRevision() { return MAPD_REVISION; }
const char* MapdTorchVersion() { return MAPD_TORCH_VERSION; }

std::string VersionLine(const std::string& program) { return absl::StrCat(program, " ", MapdVersion(), " (revision ", MapdRevision(), ")"); }

}  // namespace mapd
