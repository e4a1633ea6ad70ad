// A job's rendezvous secret (worker/transport/store_gate.h): the coordinator draws one for each
// attempt of a job and hands it to the job's ranks with their assignment (`mapctl run` draws its
// own); rank 0's store gate admits only connections that present it.
#ifndef MAPD_COMMON_STORE_SECRET_H_
#define MAPD_COMMON_STORE_SECRET_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mapd {

// A secret's length: 32 hexadecimal characters (128 random bits).
inline constexpr int kStoreSecretChars = 32;

// The environment variable a rank reads its job's secret from (not argv: a process's arguments are
// visible to every user of the host).
inline constexpr char kStoreSecretEnv[] = "MAPD_STORE_SECRET";

// A fresh secret from the kernel's random source (getrandom).
absl::StatusOr<std::string> NewStoreSecret();

// INVALID_ARGUMENT unless `secret` is kStoreSecretChars hexadecimal characters.
absl::Status CheckStoreSecret(const std::string& secret);

// Whether `given` is the secret `expected` (never when `expected` is empty), compared without
// stopping at the first difference, so the time taken does not tell a caller how much of it they
// guessed (API tokens, rendezvous and shard secrets).
bool SameSecret(const std::string& given, const std::string& expected);

}  // namespace mapd

#endif  // MAPD_COMMON_STORE_SECRET_H_
