// Checks of numeric flags whose messages say what to give ("--devices: must be at least 1, not
// 0"), where CLI11's PositiveNumber and NonNegativeNumber say "Value 0 not in range 0.000000 to
// 1797693134862315708145…" (the whole of DBL_MAX, 300 digits).
#ifndef MAPD_CLIENT_MAPCTL_CLI_CHECKS_H_
#define MAPD_CLIENT_MAPCTL_CLI_CHECKS_H_

#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace mapd::cli {

// Passes values `least` or more (more than `least` when `strict`); otherwise says `what`. A value
// that is not a number is left to the flag's own conversion, which says so.
// `name` is what --help shows after the flag's type (INT:POSITIVE).
inline CLI::Validator NumberCheck(double least, bool strict, const std::string& what, const std::string& name) {
  return CLI::Validator(
      [least, strict, what](std::string& given) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(given.c_str(), &end);
        if (given.empty() || end == nullptr || *end != '\0') return "";
        if (strict ? v > least : v >= least) return "";
        return "must be " + what + ", not " + given.substr(0, 32);
      },
      name);
}
inline CLI::Validator AtLeastOne() { return NumberCheck(1, false, "at least 1", "POSITIVE"); }
inline CLI::Validator GreaterThanZero() { return NumberCheck(0, true, "greater than 0", "POSITIVE"); }
inline CLI::Validator ZeroOrMore() { return NumberCheck(0, false, "0 or more", "NONNEGATIVE"); }

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_CLI_CHECKS_H_
