// Mesh and cluster options, placements, collective and resharding costs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "planner/sharding/cluster.h"
#include "planner/sharding/collectives.h"
#include "planner/sharding/placement.h"

namespace mapd {
namespace {

using ::testing::HasSubstr;

TEST(Cluster, ParsesMeshes) {
  EXPECT_EQ(*ParseMesh("2x4"), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(*ParseMesh("8"), (std::vector<int64_t>{8}));
  EXPECT_FALSE(ParseMesh("2x0").ok());
  EXPECT_FALSE(ParseMesh("2*4").ok());
}

TEST(Cluster, ValidatesOptions) {
  ClusterOptions o;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("--devices N or --mesh"));
  o.devices = 8;
  o.mesh = {2, 2};
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("has 4 devices but --devices is 8"));
  o.mesh = {2, 4};
  EXPECT_TRUE(o.Validate().ok());
  o.gpus_per_node = 0;
  EXPECT_FALSE(o.Validate().ok());
  ClusterOptions bad;
  bad.devices = 8;
  bad.device_type = "tpu-v9";
  EXPECT_THAT(std::string(MakeCluster(bad).status().message()), HasSubstr("unknown device type 'tpu-v9'"));
}

TEST(Cluster, AxesInsideANodeGetFastLinks) {
  ClusterOptions o;
  o.mesh = {8, 8};  // 64 devices, 8 per node: the inner axis is a node, the outer spans nodes
  o.device_type = "h100-80g";
  auto c = MakeCluster(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_devices(), 64);
  EXPECT_EQ(c->MeshString(), "8x8");
  EXPECT_TRUE(c->links[0].inter_node);
  EXPECT_FALSE(c->links[1].inter_node);
  EXPECT_LT(c->links[1].beta, c->links[0].beta);
  EXPECT_EQ(c->memory_per_device, 80LL << 30);
  o.memory_per_device = 40LL << 30;
  o.inter_beta = 1e-9;
  auto d = MakeCluster(o);
  EXPECT_EQ(d->memory_per_device, 40LL << 30);
  EXPECT_DOUBLE_EQ(d->links[0].beta, 1e-9);
}

// A profile measured on a 2-thread host (mapctl calibrate --collectives 2,4; rates with one
// LibTorch thread): 2 local ranks each compute at its rates and meet over the 2-rank links; 4
// ranks get half a core each (half the rates, twice the kernel overhead) and the links of their
// groups' size, their latency scaled by how much more crowded the threads are than where it was
// measured (a flat 4 the 4-rank links; a 2x2 mesh's axes the 2-rank ones at twice the latency:
// 4 ranks on 2 threads, where the pair had one each); one rank has it all; a catalogue profile
// is left alone.
TEST(Cluster, RanksOfOneHostShareItsCoresAndMeetOverItsMeasuredCollectives) {
  DeviceProfile host = *LoadDeviceProfile("cpu");
  host.name = "measured-host";
  host.source = "measured";
  host.host_threads = 2;
  host.threads = 1;
  host.matmul_rates = {{8192, 5e9}, {2e9, 100e9}};
  host.vector_flops = 6e9;
  host.op_rates = {{"cross_entropy", 4e9}};
  host.host_collectives = {{2, 1e-4, 1e-9}, {4, 5e-4, 2e-9}};
  const std::string path = testing::TempDir() + "/measured-host.json";
  {
    std::ofstream(path) << host.ToJson();
  }
  ClusterOptions o;
  o.device_type = path;
  auto with = [&](std::vector<int64_t> mesh) {
    o.mesh = std::move(mesh);
    auto c = MakeCluster(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  };
  const Cluster two = with({2}), four = with({2, 2}), one = with({1}), flat_four = with({4});
  EXPECT_DOUBLE_EQ(two.device.fp32_flops, host.fp32_flops);
  EXPECT_DOUBLE_EQ(two.links[0].alpha, 1e-4);
  EXPECT_DOUBLE_EQ(four.device.fp32_flops, host.fp32_flops / 2);
  EXPECT_DOUBLE_EQ(four.device.memory_bandwidth, host.memory_bandwidth / 2);
  EXPECT_DOUBLE_EQ(four.device.vector_flops, host.vector_flops / 2);
  EXPECT_DOUBLE_EQ(four.device.op_rates.at("cross_entropy"), 2e9);
  EXPECT_DOUBLE_EQ(four.device.matmul_rates[1].rate, 50e9);
  EXPECT_DOUBLE_EQ(four.device.kernel_overhead_seconds, 2 * host.kernel_overhead_seconds);
  EXPECT_DOUBLE_EQ(four.links[0].alpha, 2e-4);
  EXPECT_DOUBLE_EQ(four.links[1].beta, 1e-9);
  EXPECT_DOUBLE_EQ(flat_four.device.fp32_flops, host.fp32_flops / 2);
  EXPECT_DOUBLE_EQ(flat_four.links[0].alpha, 5e-4);
  EXPECT_DOUBLE_EQ(flat_four.links[0].beta, 2e-9);
  EXPECT_DOUBLE_EQ(one.device.fp32_flops, host.fp32_flops);
  o.device_type = "cpu";
  EXPECT_DOUBLE_EQ(with({4}).device.fp32_flops, LoadDeviceProfile("cpu")->fp32_flops);
  // Measured compute speeds beside the others replace the share of the cores: 2 ranks each at
  // 0.6 of one alone (2 threads, yet not twice the work); 3 ranks at the nearest count's
  // speed, scaled by the share of the threads (0.6 x (2/3) / 1); kernel overheads likewise.
  // A collective's latency among computing ranks, where measured, is the links' alpha.
  host.host_collectives = {{2, 1e-4, 1e-9, 0.6, 1.5e-3}};
  {
    std::ofstream(path) << host.ToJson();
  }
  o.device_type = path;
  const Cluster two_measured = with({2}), three = with({3});
  EXPECT_DOUBLE_EQ(two_measured.device.fp32_flops, 0.6 * host.fp32_flops);
  EXPECT_DOUBLE_EQ(two_measured.device.kernel_overhead_seconds, host.kernel_overhead_seconds / 0.6);
  EXPECT_NEAR(three.device.matmul_rates[1].rate, 0.4 * 100e9, 1);
  EXPECT_DOUBLE_EQ(two_measured.links[0].alpha, 1.5e-3);
  EXPECT_DOUBLE_EQ(two_measured.links[0].beta, 1e-9);
}

TEST(Placement, StringsAndLocalShapes) {
  auto p = ParsePlacement("S(0)R");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(PlacementToString(*p), "S(0)R");
  EXPECT_EQ(PlacementToString(*ParsePlacement("R P")), "RP");
  EXPECT_FALSE(ParsePlacement("S(x)").ok());
  EXPECT_FALSE(ParsePlacement("Q").ok());
  EXPECT_EQ(*LocalShape({8, 6}, *ParsePlacement("S(0)S(1)"), {2, 3}), (Shape{4, 2}));
  EXPECT_EQ(*LocalShape({8, 6}, *ParsePlacement("S(0)S(0)"), {2, 4}), (Shape{1, 6}));
  EXPECT_EQ(LocalShape({8, 6}, *ParsePlacement("S(1)R"), {4, 2}).status().code(), absl::StatusCode::kFailedPrecondition);
}

Cluster OneAxis(int64_t n) {
  ClusterOptions o;
  o.devices = n;
  o.intra_alpha = 1e-5;
  o.intra_beta = 1e-9;  // 1 GB/s
  return *MakeCluster(o);
}

TEST(Collectives, TextbookCosts) {
  const AxisLink link{1e-5, 1e-9, false};
  const int64_t mb = 1000000;
  // An all-reduce is two exchanges (a reduce-scatter and an all-gather), one up to 4 KiB.
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kAllReduce, mb, 4, link), 2e-5 + 2 * 0.75 * 1e-3);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kAllReduce, 4096, 4, link), 1e-5 + 2 * 0.75 * 4096e-9);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kAllReduce, 4100, 4, link), 2e-5 + 2 * 0.75 * 4100e-9);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kAllGather, mb, 4, link), 1e-5 + 0.75 * 1e-3);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kReduceScatter, mb, 4, link), 1e-5 + 0.75 * 1e-3);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(CollectiveKind::kAllToAll, mb, 4, link), 1e-5 + 0.75 / 4 * 1e-3);
  EXPECT_EQ(CollectiveSeconds(CollectiveKind::kAllReduce, mb, 1, link), 0);
}

TEST(Collectives, ReshardingOneAxis) {
  const Cluster c = OneAxis(4);
  const TensorType t{v1::FLOAT32, {1024, 256}};  // 1 MiB
  const int64_t bytes = t.NumBytes();
  auto pr = ReshardCost(t, *ParsePlacement("P"), *ParsePlacement("R"), c);
  ASSERT_TRUE(pr.ok());
  ASSERT_EQ(pr->collectives.size(), 1u);
  EXPECT_EQ(pr->collectives[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(pr->collectives[0].bytes, bytes);
  EXPECT_DOUBLE_EQ(pr->seconds, 2e-5 + 1.5 * bytes * 1e-9);
  EXPECT_EQ(ReshardCost(t, *ParsePlacement("P"), *ParsePlacement("S(0)"), c)->collectives[0].kind,
            CollectiveKind::kReduceScatter);
  EXPECT_EQ(ReshardCost(t, *ParsePlacement("S(1)"), *ParsePlacement("R"), c)->collectives[0].kind,
            CollectiveKind::kAllGather);
  EXPECT_EQ(ReshardCost(t, *ParsePlacement("S(0)"), *ParsePlacement("S(1)"), c)->collectives[0].kind,
            CollectiveKind::kAllToAll);
  EXPECT_EQ(ReshardCost(t, *ParsePlacement("R"), *ParsePlacement("S(0)"), c)->seconds, 0);  // a local slice
  EXPECT_EQ(ReshardCost(t, *ParsePlacement("R"), *ParsePlacement("R"), c)->collectives.size(), 0u);
  // 1000 rows do not divide over 3 devices... but 1024 over 4 do; 1026 do not.
  EXPECT_EQ(ReshardCost({v1::FLOAT32, {1026, 4}}, *ParsePlacement("R"), *ParsePlacement("S(0)"), c).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Collectives, ReshardingTwoAxesSeesTheOtherAxisSharding) {
  ClusterOptions o;
  o.mesh = {2, 4};
  o.intra_beta = 1e-9;
  o.inter_beta = 1e-9;
  auto c = MakeCluster(o);
  ASSERT_TRUE(c.ok());
  const TensorType t{v1::FLOAT32, {64, 64}};
  // Gathering axis 1 while axis 0 still splits rows: the group sees half the tensor.
  auto r = ReshardCost(t, *ParsePlacement("S(0)S(1)"), *ParsePlacement("S(0)R"), *c);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->collectives.size(), 1u);
  EXPECT_EQ(r->collectives[0].axis, 1);
  EXPECT_EQ(r->collectives[0].bytes, t.NumBytes() / 2);
  auto both = ReshardCost(t, *ParsePlacement("PP"), *ParsePlacement("RR"), *c);
  ASSERT_EQ(both->collectives.size(), 2u);
  EXPECT_EQ(both->collectives[0].bytes, t.NumBytes());
}

TEST(Collectives, ReshardSecondsAreReshardCostsSecondsForEveryPairOfPlacements) {
  // The cost graph's allocation-free path must agree with ReshardCost exactly, errors included:
  // every pair of R/P/S(0)/S(1)/S(2) placements on a 2x4 and a 3x2x2 mesh, tensors that do and
  // do not divide, and a placement of the wrong length.
  for (const std::vector<int64_t>& mesh : {std::vector<int64_t>{2, 4}, std::vector<int64_t>{3, 2, 2}}) {
    ClusterOptions o;
    o.mesh = mesh;
    auto c = MakeCluster(o);
    ASSERT_TRUE(c.ok());
    std::vector<Placement> all = {{}};
    for (size_t a = 0; a < mesh.size(); ++a) {
      std::vector<Placement> next;
      for (const Placement& p : all) {
        for (AxisPlacement ap : {AxisPlacement::R(), AxisPlacement::P(), AxisPlacement::S(0), AxisPlacement::S(1), AxisPlacement::S(2)}) {
          Placement q = p;
          q.push_back(ap);
          next.push_back(q);
        }
      }
      all = std::move(next);
    }
    int compared = 0, errors = 0;
    for (const TensorType& t : {TensorType{v1::FLOAT32, {24, 16, 6}}, TensorType{v1::BFLOAT16, {12, 8}}, TensorType{v1::FLOAT32, {5, 7, 9}}}) {
      for (const Placement& from : all) {
        for (const Placement& to : all) {
          auto cost = ReshardCost(t, from, to, *c);
          const double seconds = ReshardSeconds(t, from, to, *c);
          if (cost.ok()) {
            EXPECT_EQ(seconds, cost->seconds) << PlacementToString(from) << " -> " << PlacementToString(to);
          } else {
            EXPECT_LT(seconds, 0) << PlacementToString(from) << " -> " << PlacementToString(to);
            ++errors;
          }
          ++compared;
        }
      }
    }
    EXPECT_GT(errors, 0);
    EXPECT_GT(compared - errors, 0);
    EXPECT_LT(ReshardSeconds(TensorType{v1::FLOAT32, {8}}, Placement{AxisPlacement::R()}, all.front(), *c), 0);
  }
}

}  // namespace
}  // namespace mapd
