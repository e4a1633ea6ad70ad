// libFuzzer harness: a client's graph (Plan, Profile, Submit) through verification, then the
// symbolic profile every verified graph gets next. The property: no input crashes, hangs or
// trips AddressSanitizer/UndefinedBehaviorSanitizer (a signed overflow in a shape or byte
// count is a finding) — whatever the bytes, the answer is a Status.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_seeds.h"
#include "model/graph/verifier.h"
#include "planner/profile/profiler.h"
#include "proto/mapd/v1/graph.pb.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mapd::fuzz::WriteSeedsIfAsked(mapd::fuzz::SmallZooGraphs);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mapd::v1::Graph proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto graph = mapd::MakeVerifiedGraph(std::move(proto));
  if (!graph.ok()) return 0;
  mapd::ProfileOptions options;
  options.timeline = false;
  auto report = mapd::ProfileTrainingStep(*graph, options);
  (void)report;
  return 0;
}
