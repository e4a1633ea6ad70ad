// The metrics facade over prometheus-cpp (exact text, escaping, cumulative histogram buckets,
// name checks, series removed by label) and
// the coordinator's /metrics endpoint, checked by Debian's `promtool check metrics`.
#include "common/metrics/metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/metrics/http_exporter.h"
#include "server/api/server.h"

namespace mapd {
namespace {

// The text's lines, sorted: prometheus-cpp keeps a family's series in a hash map, so their order
// is not fixed; a family's HELP and TYPE come first, and its name orders its lines together.
std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(Metrics, EncodesTheTextFormatWithPrometheusCpp) {
  MetricsRegistry m;
  ASSERT_TRUE(m.Counter("mapd_things_total", "Things.\nTwo lines").ok());
  ASSERT_TRUE(m.Gauge("mapd_level", "A level.").ok());
  ASSERT_TRUE(m.Histogram("mapd_wait_seconds", "Waits.", {0.1, 1}).ok());
  m.Add("mapd_things_total", {{"kind", "a\"b\\c"}}, 2);
  m.Add("mapd_things_total", {{"kind", "a\"b\\c"}});
  m.Add("mapd_things_total", {{"kind", "never"}}, 0);  // pre-initialised: shown at 0
  m.Add("mapd_things_total", {{"kind", "never"}}, -1);  // a counter only goes up
  m.Set("mapd_level", {}, 0.25);
  m.Observe("mapd_wait_seconds", {}, 0.05);
  m.Observe("mapd_wait_seconds", {}, 0.5);
  m.Observe("mapd_wait_seconds", {}, 5);
  m.Set("mapd_undeclared", {}, 1);              // a typo shows in the error counter
  m.Set("mapd_level", {{"__reserved", "x"}}, 1);  // so does a label name Prometheus refuses
  const std::vector<std::string> expected = {
      "# HELP mapd_level A level.",
      "# HELP mapd_metrics_errors_total Updates of metrics that were never declared, or with a label name Prometheus refuses (a bug if not 0).",
      "# HELP mapd_things_total Things.\\nTwo lines",
      "# HELP mapd_wait_seconds Waits.",
      "# TYPE mapd_level gauge",
      "# TYPE mapd_metrics_errors_total counter",
      "# TYPE mapd_things_total counter",
      "# TYPE mapd_wait_seconds histogram",
      "mapd_level 0.25",
      "mapd_metrics_errors_total 2",
      "mapd_things_total{kind=\"a\\\"b\\\\c\"} 3",
      "mapd_things_total{kind=\"never\"} 0",
      "mapd_wait_seconds_bucket{le=\"+Inf\"} 3",
      "mapd_wait_seconds_bucket{le=\"0.1\"} 1",
      "mapd_wait_seconds_bucket{le=\"1\"} 2",
      "mapd_wait_seconds_count 3",
      "mapd_wait_seconds_sum 5.55",
  };
  EXPECT_EQ(SortedLines(m.Encode()), expected) << m.Encode();
  EXPECT_FALSE(m.Counter("mapd_things", "no _total").ok());
  EXPECT_FALSE(m.Gauge("2bad", "bad name").ok());
  EXPECT_FALSE(m.Gauge("mapd_things_total", "declared as a counter").ok());
  EXPECT_FALSE(m.Gauge("mapd_metrics_errors_total", "the registry's own").ok());
  EXPECT_TRUE(m.Counter("mapd_things_total", "declared again: the same family").ok());
  EXPECT_FALSE(m.Histogram("mapd_h", "decreasing", {1, 0.5}).ok());
}

TEST(Metrics, AFinishedJobsSeriesAreRemovedInEveryFamily) {
  MetricsRegistry m;
  ASSERT_TRUE(m.Gauge("mapd_step", "Step.").ok());
  ASSERT_TRUE(m.Counter("mapd_jobs_total", "Jobs.").ok());
  ASSERT_TRUE(m.Histogram("mapd_step_seconds", "Step time.", {1}).ok());
  for (const char* job : {"1", "2"}) {
    m.Set("mapd_step", {{"job_id", job}, {"rank", "0"}}, 5);
    m.Observe("mapd_step_seconds", {{"job_id", job}, {"rank", "0"}}, 0.5);
  }
  m.Add("mapd_jobs_total", {{"outcome", "succeeded"}});
  m.RemoveSeries("job_id", "1");
  const std::string text = m.Encode();
  EXPECT_EQ(text.find("job_id=\"1\""), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_step{job_id=\"2\",rank=\"0\"} 5"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_step_seconds_count{job_id=\"2\",rank=\"0\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_jobs_total{outcome=\"succeeded\"} 1"), std::string::npos) << text;
  m.Clear("mapd_step");  // a gauge family emptied, the others kept
  const std::string cleared = m.Encode();
  EXPECT_EQ(cleared.find("mapd_step{"), std::string::npos) << cleared;
  EXPECT_NE(cleared.find("# TYPE mapd_step gauge\n"), std::string::npos) << cleared;  // the family stays listed
  EXPECT_NE(cleared.find("mapd_step_seconds_count{job_id=\"2\",rank=\"0\"} 1"), std::string::npos) << cleared;
  m.Set("mapd_step", {{"job_id", "3"}}, 1);  // and filled again
  EXPECT_NE(m.Encode().find("mapd_step{job_id=\"3\"} 1"), std::string::npos);
  EXPECT_NE(m.Encode().find("mapd_metrics_errors_total 0"), std::string::npos);
}

std::string Promtool(const std::string& text, int* rc) {
  const std::string file = (std::filesystem::temp_directory_path() / ("mapd-metrics-" + std::to_string(getpid()) + ".txt")).string();
  std::ofstream(file) << text;
  FILE* p = popen(("promtool check metrics < " + file + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  *rc = p == nullptr ? -1 : pclose(p);
  std::filesystem::remove(file);
  return out;
}

// A coordinator on loopback with its metrics endpoint, both on ports it picks.
ServerOptions LoopbackOptions() {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "127.0.0.1:0";
  o.token = "t";
  return o;
}

// A port is one process's: a second coordinator on the first's gRPC port, or a second metrics
// endpoint on a taken port, does not start (gRPC and httplib set SO_REUSEPORT by default, and the
// kernel then split the clients between the two), and the error names the port.
TEST(Metrics, PortsAreOwnedNotShared) {
  const ServerOptions o = LoopbackOptions();
  auto first = MapdServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status();
  ServerOptions same_port = o;
  same_port.listen = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MapdServer::Start(same_port);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on " + same_port.listen + ": the port is taken"), std::string::npos)
      << second.status();
  MetricsRegistry registry;
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->metrics_port());
  auto exporter = MetricsExporter::Start(taken, &registry, nullptr);
  ASSERT_FALSE(exporter.ok());
  EXPECT_NE(exporter.status().message().find("port " + std::to_string((*first)->metrics_port()) + " is taken"), std::string::npos)
      << exporter.status();
  // The first still answers on both.
  httplib::Client client("127.0.0.1", (*first)->metrics_port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(Metrics, TheCoordinatorsEndpointPassesPromtool) {
  const ServerOptions o = LoopbackOptions();
  auto server = MapdServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  v1::JobSpec spec;
  spec.set_model("gpt2:layers=2,hidden=32,heads=4,vocab=64,seq=8,batch=4");
  spec.mutable_training()->set_steps(3);
  spec.set_ranks(2);
  ASSERT_TRUE((*server)->jobs().Submit(spec).ok());
  spec.set_memory_per_device(1024);
  ASSERT_FALSE((*server)->jobs().Submit(spec).ok());  // refused: counted
  httplib::Client client("127.0.0.1", (*server)->metrics_port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << "no answer from /metrics";
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  const std::string& text = res->body;
  EXPECT_NE(text.find("mapd_jobs{state=\"PENDING\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_job_submissions_total{outcome=\"admitted\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_job_submissions_total{outcome=\"refused\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_admission_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_job_predicted_peak_bytes{job_id=\"1\"} "), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_workers{state=\"ALIVE\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_metrics_errors_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mapd_build_info{component=\"coordinator\",revision=\""), std::string::npos) << text;
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool (Debian's prometheus package, in scripts/install-deps.sh) is not installed";
  }
  int rc = 0;
  const std::string lint = Promtool(text, &rc);
  EXPECT_EQ(rc, 0) << lint << "\n" << text;
}

}  // namespace
}  // namespace mapd
