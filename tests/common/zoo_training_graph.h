// A zoo model with its training loss appended, verified — the graph the planner and runtime
// tests plan and train.
#ifndef MAPD_TESTS_COMMON_ZOO_TRAINING_GRAPH_H_
#define MAPD_TESTS_COMMON_ZOO_TRAINING_GRAPH_H_

#include <gtest/gtest.h>

#include <string>

#include "model/graph/loss.h"
#include "model/graph/verifier.h"
#include "model/zoo/zoo.h"

namespace mapd {

inline Graph ZooTrainingGraph(const std::string& spec) {
  auto trainable = WithTrainingLoss(*BuildZooModel(spec), LossKind::kAuto);
  EXPECT_TRUE(trainable.ok()) << trainable.status();
  auto g = MakeVerifiedGraph(*std::move(trainable));
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

}  // namespace mapd

#endif  // MAPD_TESTS_COMMON_ZOO_TRAINING_GRAPH_H_
