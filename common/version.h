// The build's version (the CMake project's) and source revision (git, when CMake configured): every
// binary's --version and the mapd_build_info series.
#ifndef MAPD_COMMON_VERSION_H_
#define MAPD_COMMON_VERSION_H_

#include <string>

namespace mapd {

const char* MapdVersion();   // "0.1.0"
const char* MapdRevision();  // a short git commit id, or "unknown" when built outside git
// The LibTorch version this build's ranks link ("1.13.0"), or "none" for a build without it.
const char* MapdTorchVersion();
// "PROGRAM 0.1.0 (revision abc123def456)": what --version prints.
std::string VersionLine(const std::string& program);

}  // namespace mapd

#endif  // MAPD_COMMON_VERSION_H_
