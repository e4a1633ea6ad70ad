// A program's last line of defence: an exception that escaped the code meant to turn it into a
// status, as one (errors are meant to travel as absl::Status; this only keeps a stray one from
// aborting with a C++ backtrace).
#ifndef MAPD_COMMON_ESCAPED_EXCEPTION_H_
#define MAPD_COMMON_ESCAPED_EXCEPTION_H_

#include <exception>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mapd {

// The first line of its message (LibTorch appends a C++ backtrace); RESOURCE_EXHAUSTED when it
// ran out of memory (std::bad_alloc, or a message that says so, as a memory cap's
// c10::OutOfMemoryError does), INTERNAL otherwise.
inline absl::Status EscapedExceptionStatus(const std::exception& e) {
  std::string text = e.what();
  text = text.substr(0, text.find('\n'));
  if (text.size() > 600) text = text.substr(0, 600) + "...";
  const bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr || absl::StartsWith(text, "out of memory") ||
                      absl::StrContains(text, "CUDA out of memory");
  if (memory) return absl::ResourceExhaustedError(text);
  return absl::InternalError(absl::StrCat("unexpected error: ", text));
}

}  // namespace mapd

#endif  // MAPD_COMMON_ESCAPED_EXCEPTION_H_
