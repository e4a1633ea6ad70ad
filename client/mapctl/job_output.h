// How mapctl's job commands print: protos as JSON with integers as numbers (protobuf's JSON
// mapping writes int64 as strings) and times as RFC 3339 (`created_unix_seconds` becomes
// `created_time`), the same as YAML, ages as kubectl shows them, and one line per event.
#ifndef MAPD_CLIENT_MAPCTL_JOB_OUTPUT_H_
#define MAPD_CLIENT_MAPCTL_JOB_OUTPUT_H_

#include <google/protobuf/message.h>

#include <string>

#include "nlohmann/json.hpp"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd::cli {

// 2026-12-05T07:08:38Z (UTC); "" for 0.
std::string Rfc3339(double unix_seconds);
// The local time "2026-12-05 07:08:38", or "-" for 0.
std::string When(double unix_seconds);
// "45s", "12m", "3h", "2d" since `unix_seconds` (kubectl's AGE); "-" for 0.
std::string Age(double unix_seconds, double now_unix_seconds);
double NowUnixSeconds();

// The message as JSON under its proto field names, int64 fields as numbers, `*unix_seconds`
// fields as `*time` strings in RFC 3339.
nlohmann::json ToJson(const google::protobuf::Message& message);
// JSON as block YAML; strings that would read back as something else are quoted.
std::string ToYaml(const nlohmann::json& value);
// -o json and -o yaml: a document rather than lines for people.
inline bool IsDocumentFormat(const std::string& format) { return format == "json" || format == "yaml"; }
// `value` as the -o format asks: indented JSON, or YAML.
void PrintDocument(const std::string& format, const nlohmann::json& value);

std::string StateName(v1::JobState state);
// One event as `mapctl logs` and `watch` print it.
std::string EventLine(const v1::JobEvent& event, int64_t steps);

}  // namespace mapd::cli

#endif  // MAPD_CLIENT_MAPCTL_JOB_OUTPUT_H_
