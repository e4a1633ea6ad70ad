#include "common/store_secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mapd {

bool SameSecret(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % (expected.empty() ? 1 : expected.size())]);
  }
  return diff == 0 && !expected.empty();
}

absl::StatusOr<std::string> NewStoreSecret() {
  char bytes[kStoreSecretChars / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t r = getrandom(bytes + got, sizeof bytes - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::InternalError(absl::StrCat("cannot draw a rendezvous secret: ", strerror(errno)));
    got += static_cast<size_t>(r);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof bytes));
}

absl::Status CheckStoreSecret(const std::string& secret) {
  bool hex = secret.size() == kStoreSecretChars;
  for (char c : secret) hex = hex && absl::ascii_isxdigit(static_cast<unsigned char>(c));
  if (!hex) return absl::InvalidArgumentError(absl::StrCat("a rendezvous secret is ", kStoreSecretChars, " hexadecimal characters"));
  return absl::OkStatus();
}

}  // namespace mapd
