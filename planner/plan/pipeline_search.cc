#include "planner/plan/pipeline_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "planner/plan/baselines.h"
#include "planner/plan/cost_graph_cache.h"
#include "planner/plan/stage_solver.h"
#include "planner/plan/stages.h"
#include "planner/sharding/collectives.h"

namespace mapd {

int64_t PipelinePlan::devices() const {
  int64_t n = stages;
  for (int64_t d : stage_mesh) n *= d;
  return n;
}

std::string StagePlan::LayerRange() const { return first_name == last_name ? first_name : absl::StrCat(first_name, "-", last_name); }

std::string PipelinePlan::MeshString() const { return absl::StrCat(stages, " stages x ", absl::StrJoin(stage_mesh, "x")); }

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Stage i of p: its depth (micro-batches in flight under 1F1B) as costed — every middle stage at
// stage 1's, which bounds them all.
int64_t CostedDepth(int i, int p) { return i == 0 ? p : (i == p - 1 ? 1 : p - 1); }

// Interleaved 1F1B (v ≥ 2 chunks a device, Megatron-LM's schedule): device stage d runs
// 2(p − d − 1) + (v − 1)·p chunk forwards before its first backward, so it keeps that many plus
// one chunks' activations (at most all m·v of them), spread over its v chunks.
int64_t InterleavedInFlight(int d, int p, int64_t v, int64_t m) {
  const int64_t chunks = std::min<int64_t>(m * v, 2 * static_cast<int64_t>(p - d - 1) + (v - 1) * p + 1);
  return (chunks + v - 1) / v;
}
// Chunk c of p·v: the micro-batches its activations are costed at (v = 1: CostedDepth; v ≥ 2:
// device 0's, which bounds every device's, and the last chunk — the epilogue, with the head — at
// its own device's) and those it keeps.
int64_t ChunkCostedDepth(int c, int p, int64_t v, int64_t m) {
  if (v == 1) return CostedDepth(c, p);
  return InterleavedInFlight(c == p * v - 1 ? p - 1 : 0, p, v, m);
}
int64_t ChunkInFlight(int c, int p, int64_t v, int64_t m) {
  return v == 1 ? std::min<int64_t>(p - c, m) : InterleavedInFlight(c % p, p, v, m);
}

struct Partition {
  std::vector<int> ends;  // per stage: its end layer
  double step_seconds = kInf;
};

// T and the bubble (pipeline_search.h) of the stages' passes u_i and once-a-step parts g_i.
struct PipelineTime {
  double step_seconds = 0, bubble_fraction = 0;
};
// `passes` and `onces` per device stage (a device's chunks summed); v chunks a device: the fill
// and drain are one chunk's pass on each device, then m·v − 1 chunk passes on the slowest.
PipelineTime TimeOf(const std::vector<double>& passes, const std::vector<double>& onces, int64_t m, int64_t v = 1) {
  double sum = 0, slowest = 0, once = 0;
  for (double u : passes) {
    sum += u;
    slowest = std::max(slowest, u);
  }
  for (double g : onces) once = std::max(once, g);
  const double vd = static_cast<double>(v);
  const double pipeline = sum / vd + (static_cast<double>(m) - 1 / vd) * slowest;
  const double p = static_cast<double>(passes.size());
  return {pipeline + once, pipeline > 0 ? 1 - static_cast<double>(m) * sum / (p * pipeline) : 0};
}

// The best cut of the layers into p stages on `mesh` with m micro-batches: Alpa's threshold
// dynamic programme over stage lengths within one layer of L/p.
// `layer_bound` is U1 (a lower bound on any layer's share of a stage's pass); a triple whose
// first stage alone shows that no cut can beat `cutoff` (T ≥ m·u_0 + g_0 + (L − k_0)·U1) is given up
// before the other stages are solved.
absl::StatusOr<Partition> BestPartition(StageSolver& solver, int p, const std::vector<int64_t>& mesh, int64_t m,
                                        double cutoff, double layer_bound) {
  const int L = solver.layers();
  const int kmin = std::max(1, L / p - 1), kmax = std::min(L - (p - 1), (L + p - 1) / p + 1);
  // u(i, a, k) for every reachable stage, solved once per kind.
  std::map<std::tuple<int, int, int>, const StageSolve*> u;  // (stage, first layer, length)
  std::vector<double> thresholds;
  std::vector<std::vector<bool>> reach(p + 1, std::vector<bool>(L + 1, false));
  reach[0][0] = true;
  for (int i = 0; i < p; ++i) {
    for (int a = 0; a <= L; ++a) {
      if (!reach[i][a]) continue;
      for (int k = kmin; k <= kmax; ++k) {
        const int b = a + k;
        const int left = p - i - 1;  // stages after this one, each at least kmin and at most kmax layers
        if (b > L || L - b < left * kmin || L - b > left * kmax || (i == p - 1 && b != L)) continue;
        // T ≥ m·pass + g of this stage + Σ of the others' passes ≥ its objective + (L − k)·U1: a
        // stage plan no faster than the cutoff less the others' least share cannot be in a better one.
        const double stage_cutoff = cutoff - (L - k) * layer_bound;
        if (std::isfinite(cutoff) && stage_cutoff <= 0) continue;
        auto s = solver.Solve(a, b, CostedDepth(i, p), mesh, m, 0, stage_cutoff);
        if (!s.ok()) return s.status();
        if (!(*s)->fits) continue;
        u[{i, a, k}] = *s;
        if (i == 0 && static_cast<double>(m) * (*s)->u() + (*s)->once_seconds + (L - k) * layer_bound >= cutoff) continue;
        reach[i + 1][b] = true;
        thresholds.push_back((*s)->u());
      }
    }
    if (std::none_of(reach[i + 1].begin(), reach[i + 1].end(), [](bool r) { return r; })) return Partition{};
  }
  if (!reach[p][L]) return Partition{};
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  Partition best;
  for (double t : thresholds) {
    // F[i][l]: least Σ u over i stages covering layers [0, l) with every u ≤ t.
    std::vector<std::vector<double>> F(p + 1, std::vector<double>(L + 1, kInf));
    std::vector<std::vector<int>> from(p + 1, std::vector<int>(L + 1, -1));
    F[0][0] = 0;
    for (int i = 0; i < p; ++i) {
      for (int a = 0; a <= L; ++a) {
        if (!std::isfinite(F[i][a])) continue;
        for (int k = kmin; k <= kmax; ++k) {
          auto it = u.find({i, a, k});
          if (it == u.end() || it->second->u() > t) continue;
          const double v = F[i][a] + it->second->u();
          if (v < F[i + 1][a + k]) {
            F[i + 1][a + k] = v;
            from[i + 1][a + k] = a;
          }
        }
      }
    }
    if (!std::isfinite(F[p][L])) continue;
    Partition cand;
    cand.ends.assign(p, L);
    std::vector<double> passes(p), onces(p);
    for (int i = p, l = L; i > 0; --i) {
      const int a = from[i][l];
      cand.ends[i - 1] = l;
      const StageSolve* chosen = u.at({i - 1, a, l - a});
      passes[i - 1] = chosen->u();
      onces[i - 1] = chosen->once_seconds;
      l = a;
    }
    cand.step_seconds = TimeOf(passes, onces, m).step_seconds;
    if (cand.step_seconds < best.step_seconds) best = std::move(cand);
  }
  return best;
}

// The memory of each device stage of `plan`: its chunks' terms summed (v = 1: its stage's).
std::vector<ChoiceCost> DeviceMemory(const PipelinePlan& plan) {
  std::vector<ChoiceCost> device(plan.stages);
  for (size_t c = 0; c < plan.stage_plans.size(); ++c) {
    const ChoiceCost& k = plan.stage_plans[c].plan.cost;
    ChoiceCost& d = device[c % plan.stages];
    d.parameter_bytes += k.parameter_bytes;
    d.gradient_bytes += k.gradient_bytes;
    d.optimizer_bytes += k.optimizer_bytes;
    d.activation_bytes += k.activation_bytes;
    d.recompute_bytes += k.recompute_bytes;
    d.fixed_bytes += k.fixed_bytes;
  }
  return device;
}

// The pipeline plan of a cut, its stages' graphs and plans at their own depths: `ends` holds the
// end layer of each of the p·v chunks (v = 1: of each stage); chunk c runs on device stage c mod p.
// With `real_graphs`, each stage's graph holds its own layers (for the plan that is kept); else
// it is the memoised graph of its kind.
absl::StatusOr<PipelinePlan> Assemble(StageSolver& solver, const Graph& graph, const LayerSequence& seq, int p,
                                      const std::vector<int64_t>& mesh, int64_t m, const std::vector<int>& ends,
                                      int64_t tp, const std::string& name, bool real_graphs = false, int64_t v = 1) {
  PipelinePlan plan;
  plan.name = name;
  plan.tensor_parallel = tp;
  plan.stages = p;
  plan.stage_mesh = mesh;
  plan.micro_batches = m;
  plan.virtual_stages = v;
  if (v >= 2) plan.schedule = absl::StrCat("interleaved 1F1B, ", v, " chunks a device");
  plan.fits = true;
  const int chunks = static_cast<int>(ends.size());
  for (int i = 0, a = 0; i < chunks; a = ends[i], ++i) {
    const int64_t costed_depth = ChunkCostedDepth(i, p, v, m);
    auto s = solver.Solve(a, ends[i], costed_depth, mesh, m, tp);
    if (!s.ok()) return s.status();
    absl::StatusOr<std::shared_ptr<const Graph>> g = absl::UnknownError("");
    if (real_graphs) {
      auto own = StageGraph(graph, seq, a, ends[i]);
      if (!own.ok()) return own.status();
      g = std::make_shared<const Graph>(*std::move(own));
    } else {
      g = solver.GraphOfKind(a, ends[i]);
    }
    if (!g.ok()) return g.status();
    StagePlan st;
    st.first_layer = a;
    st.end_layer = ends[i];
    st.first_name = seq.layers[a];
    st.last_name = seq.layers[ends[i] - 1];
    st.in_flight = ChunkInFlight(i, p, v, m);
    st.graph = *std::move(g);
    st.plan = (*s)->plan;
    st.pass_seconds = (*s)->pass_seconds + (*s)->send_seconds;
    st.once_seconds = (*s)->once_seconds;
    st.send_seconds = (*s)->send_seconds;
    // A chunk costed at a deeper stage's depth keeps fewer micro-batches.
    const int64_t costed = std::min<int64_t>(costed_depth, m);
    if (costed > st.in_flight) {
      // The activations kept, and what recomputation takes from them, are per micro-batch in flight.
      const double kept = static_cast<double>(st.in_flight) / static_cast<double>(costed);
      st.plan.cost.activation_bytes *= kept;
      st.plan.cost.recompute_bytes *= kept;
    }
    plan.fits = plan.fits && (*s)->fits;
    plan.stage_plans.push_back(std::move(st));
  }
  // A weight read by the first and the last stage (tied embedding and LM head): its gradient
  // summed between them once a step.
  if (p >= 2) {
    const Graph& first = *plan.stage_plans.front().graph;
    const Graph& last = *plan.stage_plans.back().graph;
    const AxisLink link = solver.StageLink(plan.devices() / p);
    double tie = 0;
    for (const std::string& name : SharedParameters(first, last)) {
      const v1::Parameter* par = first.FindParameter(name);
      if (par == nullptr || !par->trainable()) continue;
      const double bytes = static_cast<double>(TensorType::FromProto(par->type()).NumBytes()) /
                           static_cast<double>(std::max<int64_t>(1, plan.devices() / p));
      tie += CollectiveSeconds(CollectiveKind::kAllReduce, static_cast<int64_t>(bytes), 2, link);
    }
    plan.stage_plans.front().once_seconds += tie;
    plan.stage_plans.back().once_seconds += tie;
  }
  // Per device stage: its chunks' passes, once-a-step parts and memory summed.
  std::vector<double> passes(p, 0.0), onces(p, 0.0);
  for (int c = 0; c < chunks; ++c) {
    passes[c % p] += plan.stage_plans[c].pass_seconds;
    onces[c % p] += plan.stage_plans[c].once_seconds;
  }
  for (const ChoiceCost& d : DeviceMemory(plan)) plan.peak_bytes = std::max(plan.peak_bytes, d.peak_bytes());
  // Interleaved, a device holds its V chunks, each solved under B / V: whether they fit is their sum
  // against B (a chunk over its share, the embedding's, may sit beside a smaller one).
  if (v >= 2) plan.fits = plan.peak_bytes <= static_cast<double>(solver.budget()) * static_cast<double>(v);
  const PipelineTime time = TimeOf(passes, onces, m, v);
  plan.step_seconds = time.step_seconds;
  plan.bubble_fraction = time.bubble_fraction;
  return plan;
}

// The stage counts searched: the pinned one, or every 2 ≤ p ≤ L dividing the devices.
absl::StatusOr<std::vector<int>> StageCounts(const PlannerOptions& options, int64_t devices, int layers) {
  if (options.pipeline_stages >= 2) {
    const int p = options.pipeline_stages;
    if (devices % p != 0) {
      return absl::InvalidArgumentError(absl::StrCat(p, " pipeline stages do not divide ", devices,
                                                     " devices; every stage has as many devices"));
    }
    if (p > layers) {
      return absl::InvalidArgumentError(absl::StrCat(p, " pipeline stages for ", layers, " layers: a stage holds at least one layer"));
    }
    return std::vector<int>{p};
  }
  std::vector<int> out;
  for (int p = 2; p <= layers && p <= devices; ++p) {
    if (devices % p == 0) out.push_back(p);
  }
  return out;
}

bool Faster(const PipelinePlan& a, const PipelinePlan& b) {
  if (a.fits != b.fits) return a.fits;
  return a.fits ? a.step_seconds < b.step_seconds : a.peak_bytes < b.peak_bytes;
}

// One Megatron TP × PP × DP configuration.
struct MegatronConfig {
  int pp = 1;
  int64_t tp = 1, dp = 1;
  int64_t v = 1;  // chunks of layers a device (≥ 2: the interleaved schedule)
  std::string Name() const {
    return absl::StrCat("Megatron TP=", tp, " x PP=", pp, dp > 1 ? absl::StrCat(" x DP=", dp) : "",
                        v >= 2 ? absl::StrCat(", interleaved x", v) : "");
  }
  // A stage's mesh: {DP, TP}, or 1-D when either is 1.
  std::vector<int64_t> StageMesh() const { return dp > 1 && tp > 1 ? std::vector<int64_t>{dp, tp} : std::vector<int64_t>{dp * tp}; }
  // The micro-batch counts of `counts` it may take: at least PP, each micro-batch splitting over DP
  // (interleaved: a multiple of PP, as Megatron-LM's schedule requires).
  std::vector<int64_t> Counts(const std::vector<int64_t>& counts, int64_t batch) const {
    std::vector<int64_t> ms;
    for (int64_t m : counts) {
      if (m >= pp && batch % m == 0 && (batch / m) % dp == 0 && (v == 1 || m % pp == 0)) ms.push_back(m);
    }
    return ms;
  }
  // The end layer of each of the PP·V equal chunks.
  std::vector<int> Ends(int layers) const {
    std::vector<int> ends;
    const int chunks = static_cast<int>(pp * v);
    for (int i = 1; i <= chunks; ++i) ends.push_back(i * layers / chunks);
    return ends;
  }
};

// Megatron TP × PP × DP: equal stages (PP divides the layers), each stage Megatron TP × DP,
// tuned as people tune it: the fewest micro-batches (at least PP) at which every stage fits
// without recomputation — else with every layer recomputed — found by bisection (a stage's
// activations only shrink as micro-batches grow), then 2× and 4× as many for a smaller bubble;
// the fastest of those.
absl::StatusOr<PipelinePlan> MegatronPipeline(StageSolver& solver, const Graph& graph, const LayerSequence& seq,
                                              const MegatronConfig& config, const std::vector<int64_t>& counts, int64_t batch) {
  const int L = seq.num_layers();
  const int pp = config.pp;
  const int64_t tp = config.tp, dp = config.dp;
  const int64_t v = config.v;
  const std::string name = config.Name();
  const std::vector<int64_t> mesh = config.StageMesh();
  const std::vector<int> ends = config.Ends(L);
  const int chunks = static_cast<int>(ends.size());
  const std::vector<int64_t> ms = config.Counts(counts, batch);  // the family's
  enum class Fit { kNotApplicable, kNo, kRecomputed, kPlain };
  std::map<std::pair<int64_t, bool>, Fit> memo;
  // How every stage fits at m (the first, which keeps the most micro-batches, solved first), or
  // with `first_only` the first stage alone.
  auto fit = [&](int64_t m, bool first_only = false) -> absl::StatusOr<Fit> {
    auto it = memo.find({m, first_only});
    if (it != memo.end()) return it->second;
    Fit f = Fit::kPlain;
    for (int i : {0, chunks - 1, chunks > 2 ? 1 : -1}) {
      if (i < 0 || (first_only && i != 0)) continue;
      auto s = solver.Solve(i == 0 ? 0 : ends[i - 1], ends[i], ChunkCostedDepth(i, pp, v, m), mesh, m, tp);
      if (!s.ok()) return s.status();
      if (!(*s)->plan.applicable) {
        f = Fit::kNotApplicable;
        break;
      }
      if (!(*s)->fits) {
        f = Fit::kNo;
        break;
      }
      if (!(*s)->plan.recomputed_layers.empty()) f = Fit::kRecomputed;
    }
    return memo[{m, first_only}] = f;
  };
  // The first count in ms at which fit(m) ≥ want (assumed monotone), or ms.size(): bisection on
  // the first stage alone (it keeps the most micro-batches), then on up until every stage does.
  auto first_at_least = [&](Fit want) -> absl::StatusOr<size_t> {
    size_t lo = 0, hi = ms.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      auto f = fit(ms[mid], /*first_only=*/true);
      if (!f.ok()) return f.status();
      if (*f >= want) hi = mid;
      else lo = mid + 1;
    }
    for (; lo < ms.size(); ++lo) {
      auto f = fit(ms[lo]);
      if (!f.ok()) return f.status();
      if (*f >= want) break;
    }
    return lo;
  };
  if (ms.empty()) {
    PipelinePlan na;
    na.name = name;
    na.tensor_parallel = tp;
    na.stages = pp;
    na.stage_mesh = mesh;
    na.applicable = false;
    na.note = absl::StrCat("no micro-batch count of at least ", pp, " leaves a micro-batch that splits over ", dp,
                           " data-parallel devices");
    return na;
  }
  for (Fit want : {Fit::kPlain, Fit::kRecomputed}) {
    auto first = first_at_least(want);
    if (!first.ok()) return first.status();
    if (*first == ms.size()) continue;
    std::optional<PipelinePlan> best;
    for (size_t i = *first; i < ms.size() && ms[i] <= 4 * ms[*first]; ++i) {
      if (ms[i] != ms[*first] && ms[i] != 2 * ms[*first] && ms[i] != 4 * ms[*first]) continue;
      auto f = fit(ms[i]);
      if (!f.ok()) return f.status();
      if (*f < want) continue;
      auto plan = Assemble(solver, graph, seq, pp, mesh, ms[i], ends, tp, *f == Fit::kPlain ? name : name + " + full recompute",
                           false, v);
      if (!plan.ok()) return plan.status();
      if (!best || plan->step_seconds < best->step_seconds) best = *std::move(plan);
    }
    if (best) return *best;
  }
  // Nothing fits: the family at its most micro-batches, reported as not fitting.
  return Assemble(solver, graph, seq, pp, mesh, ms.back(), ends, tp, name, false, v);
}

// Every (p, submesh, m) with its lower bound (pipeline_search.h), lowest first.
struct Config {
  int p;
  std::vector<int64_t> mesh;
  int64_t m;
  double bound;
  double layer_bound;  // U1
};

absl::StatusOr<std::vector<Config>> Bounds(StageSolver& solver, const PlannerOptions& options, const std::vector<int>& stage_counts,
                                           const std::vector<int64_t>& counts, int64_t devices) {
  std::vector<Config> configs;
  const int L = solver.layers();
  // MAP's own pipelines are 1F1B: none when the pins ask for the interleaved schedule.
  if (!options.pins.AllowsVirtualStages(1)) return configs;
  for (int p : stage_counts) {
    for (const auto& mesh : MeshShapes(devices / p, options.max_mesh_axes)) {
      if (!options.pins.AllowsStageMesh(mesh)) continue;
      for (int64_t m : counts) {
        if (m < p) continue;  // more than half of every stage idle
        auto one = solver.LayerBound(mesh, m);
        if (!one.ok()) return one.status();
        // Some stage holds k* ≥ ⌈L/p⌉ layers: T ≥ (m·u* + g*) + Σ_{others} u ≥ k*·C1 + (L − k*)·U1.
        const int most = (L + p - 1) / p;
        configs.push_back({p, mesh, m, most * one->objective + (L - most) * one->pass, one->pass});
      }
    }
  }
  std::stable_sort(configs.begin(), configs.end(), [](const Config& a, const Config& b) { return a.bound < b.bound; });
  return configs;
}

// A Megatron TP × PP × DP pipeline not solved, with its lower bound.
PipelinePlan Pruned(const MegatronConfig& config, double bound, const std::string& fastest_name, double fastest) {
  PipelinePlan pruned;
  pruned.name = config.Name();
  pruned.tensor_parallel = config.tp;
  pruned.stages = config.pp;
  pruned.stage_mesh = config.StageMesh();
  pruned.virtual_stages = config.v;
  pruned.pruned = true;
  pruned.step_seconds = bound;
  pruned.note = absl::StrFormat("not solved: at least %.4g s a step, and '%s' takes %.4g s", bound, fastest_name, fastest);
  return pruned;
}

// A lower bound on the Megatron TP × PP × DP pipeline over the micro-batch counts it may take,
// from its family's own middle layer (MegatronLayerBound): some stage holds L/PP layers, so
// T ≥ (L/PP)·C1 + (L − L/PP)·U1, as for MAP's (pipeline_search.h). 0 when none is known.
absl::StatusOr<double> MegatronBound(StageSolver& solver, const MegatronConfig& config, const std::vector<int64_t>& counts,
                                     int64_t batch) {
  const int L = solver.layers(), most = L / config.pp;
  double bound = kInf;
  for (int64_t m : config.Counts(counts, batch)) {
    auto one = solver.MegatronLayerBound(config.StageMesh(), m, config.tp);
    if (!one.ok()) return one.status();
    // Interleaved, the fill and drain are a chunk's pass on each device: (L − most)·U1 / V.
    bound = std::min(bound, most * one->objective + (L - most) * one->pass / static_cast<double>(config.v));
  }
  return std::isfinite(bound) ? bound : 0.0;
}

// The Megatron TP × PP × DP pipelines (every PP dividing the layers and the devices, every TP
// dividing a stage's devices), from the lowest lower bound up. A configuration's bound is the
// least of MAP's bounds for its (PP, submesh {DP, TP}, m) over the micro-batch counts it may
// take: its stages are plans of MAP's space on that submesh, so no choice of m makes it faster.
// Once it reaches the fastest fitting Megatron plan found so far — with stages, or without
// (result.baselines) — it is not solved and is listed as pruned: the fastest Megatron plan is
// still exact, and so is the comparison with MAP's. Before one is solved, a tighter bound from
// the family's own middle layer (MegatronBound) may prune it too. The bounds come from stage
// solves within the exploring gap (5%): a configuration is pruned only when its bound less that
// gap reaches it.
// Interleaved configurations (V ≥ 2: every V dividing a stage's layers, or the pinned one; only
// when the pins ask for the interleaved schedule) take their bound from their own middle layer,
// solved under a chunk's share of the budget (B / V, so that a device's V chunks fit B).
absl::Status SolveMegatronPipelines(const std::function<StageSolver&(int64_t)>& exact_for, const Graph& graph,
                                    const LayerSequence& seq, const PlannerOptions& options,
                                    const std::vector<int>& stage_counts, const std::vector<Config>& configs,
                                    const std::vector<int64_t>& counts, int64_t devices, PlanResult& result) {
  std::map<std::tuple<int, std::vector<int64_t>, int64_t>, double> bound_of;
  for (const Config& c : configs) bound_of[{c.p, c.mesh, c.m}] = c.bound;
  struct Candidate {
    MegatronConfig config;
    double bound;  // 0: unknown
  };
  std::vector<Candidate> candidates;
  const int64_t batch = result.global_batch;
  const PlanPins& pins = options.pins;
  for (int pp : stage_counts) {
    if (seq.num_layers() % pp != 0) continue;
    const int64_t n = devices / pp;
    for (int64_t tp = 1; tp <= n; ++tp) {
      if (n % tp != 0 || (pins.tp > 0 && tp != pins.tp) || (pins.dp > 0 && n / tp != pins.dp)) continue;
      for (int64_t v = 1; v <= seq.num_layers() / pp; ++v) {
        if ((seq.num_layers() / pp) % v != 0 || !pins.AllowsVirtualStages(v) || (v >= 2 && pins.virtual_stages == 0)) continue;
        const MegatronConfig config{pp, tp, n / tp, v};
        double bound = kInf;
        bool known = v == 1;  // every count it may take has a bound (MAP's are of 1F1B)
        for (int64_t m : config.Counts(counts, batch)) {
          auto it = bound_of.find({pp, config.StageMesh(), m});
          if (it == bound_of.end()) known = false;
          else bound = std::min(bound, it->second);
        }
        candidates.push_back({config, known ? bound : 0.0});
      }
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.bound < b.bound; });
  double fastest = kInf;
  std::string fastest_name;
  for (const PlanCandidate& b : result.baselines) {
    if (b.applicable && b.fits && b.name.rfind("Megatron", 0) == 0 && b.cost.step_seconds < fastest) {
      fastest = b.cost.step_seconds;
      fastest_name = b.name;
    }
  }
  const double exploring_gap = std::max(options.relative_gap, 0.05);
  const bool prune = options.prune_pipeline_baselines;
  for (const Candidate& c : candidates) {
    if (prune && std::isfinite(c.bound) && c.bound * (1 - exploring_gap) >= fastest) {
      result.pipeline_baselines.push_back(Pruned(c.config, c.bound, fastest_name, fastest));
      continue;
    }
    StageSolver& exact = exact_for(c.config.v);
    if (prune && std::isfinite(fastest)) {
      // Before solving it: the bound from the family's own layer, over the counts it may take.
      auto tighter = MegatronBound(exact, c.config, counts, batch);
      if (!tighter.ok()) return tighter.status();
      if (*tighter * (1 - exploring_gap) >= fastest) {
        result.pipeline_baselines.push_back(Pruned(c.config, *tighter, fastest_name, fastest));
        continue;
      }
    }
    auto b = MegatronPipeline(exact, graph, seq, c.config, counts, batch);
    if (!b.ok()) return b.status();
    if (b->applicable && b->fits && b->step_seconds < fastest) {
      fastest = b->step_seconds;
      fastest_name = b->name;
    }
    result.pipeline_baselines.push_back(*std::move(b));
  }
  return absl::OkStatus();
}

std::vector<int> EndsOf(const PipelinePlan& plan) {
  std::vector<int> ends;
  for (const StagePlan& s : plan.stage_plans) ends.push_back(s.end_layer);
  return ends;
}

// MAP's best pipeline per stage count: the triples from the lowest bound up, each cut by the
// dynamic programme with coarse stage solves, pruned at the best plan so far (`cutoff`, the plan
// without stages, to begin with); `best_of_p` gets each count's best cut (solved again exactly
// by the caller, with its stages' graphs).
struct Explored {
  std::map<int, PipelinePlan> best_of_p;
  int solved = 0, pruned = 0;  // configurations
};
absl::Status Explore(StageSolver& solver, const Graph& graph, const LayerSequence& seq, const PlannerOptions& options,
                     const std::vector<Config>& configs, double cutoff, bool trace, const std::atomic<bool>& cancelled,
                     Explored& out) {
  double best = cutoff;
  for (const Config& c : configs) {
    if (cancelled.load()) return absl::CancelledError("the pipeline search was abandoned");
    if (c.bound >= best * (1 - options.relative_gap)) {
      ++out.pruned;
      continue;
    }
    if (std::isfinite(best)) {
      // The stage holding the most layers must fit its budget too (StageSolver::LayerBudgetBound).
      const int layers = solver.layers();
      const int most = (layers + c.p - 1) / c.p;
      const double target = (best * (1 - options.relative_gap) - (layers - most) * c.layer_bound) / most;
      auto layer = solver.LayerBudgetBound(c.mesh, c.m, most, target);
      if (!layer.ok()) return layer.status();
      if (*layer >= target) {
        ++out.pruned;
        continue;
      }
    }
    ++out.solved;
    auto part = BestPartition(solver, c.p, c.mesh, c.m, best, c.layer_bound);
    if (!part.ok()) return part.status();
    if (!std::isfinite(part->step_seconds)) continue;
    auto plan = Assemble(solver, graph, seq, c.p, c.mesh, c.m, part->ends, 0, "MAP");
    if (!plan.ok()) return plan.status();
    if (trace) {
      std::fprintf(stderr, "mapd plan: pipeline %s m %lld bound %.4g: %s %.4g s/step\n", plan->MeshString().c_str(),
                   static_cast<long long>(c.m), c.bound, plan->fits ? "fits" : "-", plan->step_seconds);
    }
    if (plan->fits) best = std::min(best, plan->step_seconds);
    auto it = out.best_of_p.find(c.p);
    if (it == out.best_of_p.end() || Faster(*plan, it->second)) out.best_of_p[c.p] = *std::move(plan);
  }
  return absl::OkStatus();
}

// The Megatron pipelines are plans of MAP's space (equal cuts, restricted strategies): one that
// fits and is faster than the search's best becomes MAP's pipeline, and the note says so.
absl::Status AdoptFasterBaseline(const std::function<StageSolver&(int64_t)>& exact_for, const Graph& graph, const LayerSequence& seq,
                                 const PlannerOptions& options, PlanResult& result) {
  const PipelinePlan* faster = nullptr;
  for (const PipelinePlan& b : result.pipeline_baselines) {
    if (!b.applicable || !b.fits || (options.pipeline_stages >= 2 && b.stages != options.pipeline_stages)) continue;
    // What the user pinned holds for an adopted baseline too (its ZeRO-1, its micro-batches).
    if (options.micro_batches > 0 && b.micro_batches != options.micro_batches) continue;
    bool other_zero = false;
    for (const StagePlan& st : b.stage_plans) other_zero |= options.zero_stage >= 0 && st.plan.zero_stage != options.zero_stage;
    if (other_zero) continue;
    const bool beats = result.pipelines.empty() || !result.pipelines.front().fits ||
                       b.step_seconds < result.pipelines.front().step_seconds * (1 - 1e-12);
    if (beats && (faster == nullptr || b.step_seconds < faster->step_seconds)) faster = &b;
  }
  if (faster == nullptr) return absl::OkStatus();
  // The same cut and strategies, with the stages' own graphs.
  auto adopted = Assemble(exact_for(faster->virtual_stages), graph, seq, faster->stages, faster->stage_mesh, faster->micro_batches,
                          EndsOf(*faster), faster->tensor_parallel, "MAP", /*real_graphs=*/true, faster->virtual_stages);
  if (!adopted.ok()) return adopted.status();
  result.pipeline_note = absl::StrCat("the baseline '", faster->name, "', a pipeline of the same space, is faster than "
                                      "the search's own best pipeline and became MAP's");
  result.pipelines.insert(result.pipelines.begin(), *std::move(adopted));
  return absl::OkStatus();
}

// The pinned pipeline that does not fit: which device stage is over the budget, and by which of
// its memory terms (its chunks summed). One that fits but breaks an option MAP's plan keeps
// (AdoptFasterBaseline: the ZeRO stage, the micro-batches) says so instead.
absl::Status PinnedPipelineDoesNotFit(const PlanResult& result, const PlannerOptions& options, int64_t budget) {
  const PipelinePlan* pinned = nullptr;
  for (const PipelinePlan& b : result.pipeline_baselines) {
    if (b.applicable && !b.pruned && !b.stage_plans.empty()) pinned = &b;
  }
  if (pinned == nullptr) {
    return absl::FailedPreconditionError("no Megatron configuration keeps every pin: check that pp divides the layers (and "
                                         "pp·V for an interleaved schedule) and that a micro-batch splits over dp");
  }
  if (pinned->fits) {
    const int zero = pinned->stage_plans.front().plan.zero_stage;
    const bool other_zero = options.zero_stage >= 0 && zero != options.zero_stage;
    return absl::FailedPreconditionError(absl::StrCat(
        "the pinned configuration '", pinned->name, "' fits (", FormatBytes(static_cast<int64_t>(pinned->peak_bytes)), " per device) but ",
        other_zero ? absl::StrCat("runs ZeRO-", zero, " where ZeRO-", options.zero_stage, " was asked for")
                   : absl::StrCat("runs ", pinned->micro_batches, " micro-batches where ", options.micro_batches, " were asked for"),
        ": drop that option"));
  }
  const int p = pinned->stages;
  const std::vector<ChoiceCost> device = DeviceMemory(*pinned);
  std::vector<int64_t> in_flight(p, 0);
  for (size_t c = 0; c < pinned->stage_plans.size(); ++c) {
    in_flight[c % p] = std::max(in_flight[c % p], pinned->stage_plans[c].in_flight);
  }
  int worst = 0;
  for (int d = 1; d < p; ++d) {
    if (device[d].peak_bytes() > device[worst].peak_bytes()) worst = d;
  }
  return PinnedConfigurationDoesNotFit(pinned->name, pinned->micro_batches, absl::StrCat("stage ", worst), device[worst],
                                       in_flight[worst], budget);
}

}  // namespace

// What the task holds: the layer sequence, the two stage solvers (coarse for the bounds and the
// exploration, exact for the Megatron pipelines and the kept cuts) and what each step made.
// `coarse` is used only by the exploring thread while it runs, `exact` only by the caller.
struct PipelineSearchTask::State {
  State(const Graph& g, const PlannerOptions& o, std::vector<int64_t> c, LayerSequence s)
      : graph(g), options(o), counts(std::move(c)), seq(std::move(s)), coarse(graph, seq, options, true),
        exact(graph, seq, options, false) {}
  const Graph& graph;
  const PlannerOptions options;
  const std::vector<int64_t> counts;
  const LayerSequence seq;
  StageSolver coarse, exact;
  // Per V ≥ 2, the exact solver of interleaved chunks, each under B / V (ExactFor).
  std::map<int64_t, std::unique_ptr<StageSolver>> interleaved;
  std::vector<int> stage_counts;
  int64_t devices = 0, memory_per_device = 0;
  bool trace = false;
  Clock::time_point start;
  absl::Status bound_status, explore_status;
  std::atomic<bool> cancelled{false};  // the task was dropped unfinished: stop exploring
  std::vector<Config> configs;
  Explored explored;

  StageSolver& ExactFor(int64_t v) {
    if (v <= 1) return exact;
    std::unique_ptr<StageSolver>& solver = interleaved[v];
    if (solver == nullptr) {
      PlannerOptions chunk = options;
      chunk.cluster.memory_per_device /= v;
      solver = std::make_unique<StageSolver>(graph, seq, chunk, false);
    }
    return *solver;
  }
  void Lap(const std::string& what) const {
    if (trace) std::fprintf(stderr, "mapd plan: %s at %.3f s\n", what.c_str(), std::chrono::duration<double>(Clock::now() - start).count());
  }
  void Bound() {
    auto c = Bounds(coarse, options, stage_counts, counts, devices);
    if (!c.ok()) {
      bound_status = c.status();
      return;
    }
    configs = *std::move(c);
    Lap(absl::StrCat("pipeline bounds of ", configs.size(), " (stages, mesh, micro-batches)"));
  }
  void ExploreBelow(double cutoff) {
    explore_status = Explore(coarse, graph, seq, options, configs, cutoff, trace, cancelled, explored);
    Lap(absl::StrFormat("pipelines explored (%d configurations solved, %d pruned, %d stage solves, cost graphs built in %.3f s)",
                        explored.solved, explored.pruned, coarse.solved(), coarse.build_seconds()));
    coarse.Release();  // the explored plans keep what they need; freed here, beside the caller's work
  }
};

absl::StatusOr<std::unique_ptr<PipelineSearchTask>> PipelineSearchTask::Start(const Graph& graph, const PlannerOptions& options,
                                                                            const std::vector<int64_t>& counts) {
  std::unique_ptr<PipelineSearchTask> task(new PipelineSearchTask());
  auto seq = FindLayerSequence(graph);
  if (!seq.ok()) {
    if (options.pipeline_stages >= 2) return seq.status();
    task->skipped_note_ = std::string(seq.status().message());
    return task;
  }
  auto base = MakeCluster(options.cluster);
  if (!base.ok()) return base.status();
  if (!options.cluster.mesh.empty()) {
    if (options.pipeline_stages >= 2) {
      return absl::InvalidArgumentError("--mesh pins the whole mesh; with --pipeline-stages give --devices instead");
    }
    task->skipped_note_ = "a pinned mesh plans without pipeline stages";
    return task;
  }
  auto stage_counts = StageCounts(options, base->num_devices(), seq->num_layers());
  if (!stage_counts.ok()) return stage_counts.status();
  task->state_ = std::make_unique<State>(graph, options, counts, *std::move(seq));
  State& st = *task->state_;
  st.stage_counts = *std::move(stage_counts);
  st.devices = base->num_devices();
  st.memory_per_device = base->memory_per_device;
  st.trace = getenv("MAPD_TRACE") != nullptr && options.trace;
  st.start = Clock::now();
  if (options.threads >= 2 && std::thread::hardware_concurrency() >= 2) {
    PipelineSearchTask* self = task.get();
    self->cutoff_future_ = self->cutoff_.get_future();
    self->bounded_future_ = self->bounded_.get_future();
    self->thread_ = std::thread([self] {
      State& st = *self->state_;
      st.Bound();
      self->bounded_.set_value();
      const double below = self->cutoff_future_.get();
      if (std::isnan(below) || !st.bound_status.ok()) return;  // cancelled, or nothing to explore
      st.ExploreBelow(below);
    });
  }
  return task;
}

void PipelineSearchTask::ExploreBelow(double seconds) {
  if (state_ == nullptr || cutoff_set_) return;
  cutoff_set_ = true;
  if (thread_.joinable()) {
    cutoff_.set_value(seconds);
    return;
  }
  // No second core: the same steps, here.
  state_->Bound();
  if (state_->bound_status.ok()) state_->ExploreBelow(seconds);
}

PipelineSearchTask::~PipelineSearchTask() {
  if (thread_.joinable()) {
    state_->cancelled = true;
    if (!cutoff_set_) cutoff_.set_value(std::numeric_limits<double>::quiet_NaN());
    thread_.join();
  }
}

absl::Status PipelineSearchTask::Finish(PlanResult& result) {
  if (state_ == nullptr) {
    result.pipeline_note = skipped_note_;
    return absl::OkStatus();
  }
  if (!cutoff_set_) return absl::InternalError("the pipeline search was finished before it was given the plan without stages");
  State& st = *state_;
  const PlannerOptions& options = st.options;
  if (thread_.joinable()) {
    bounded_future_.wait();  // the Megatron pipelines need the bounds (and `exact` is this thread's)
  }
  if (!st.bound_status.ok()) return st.bound_status;
  const std::function<StageSolver&(int64_t)> exact_for = [&st](int64_t v) -> StageSolver& { return st.ExactFor(v); };
  // Pins that ask for the interleaved schedule are kept by the Megatron pipelines only.
  if (options.baselines || !options.pins.AllowsVirtualStages(1)) {
    if (auto s = SolveMegatronPipelines(exact_for, st.graph, st.seq, options, st.stage_counts, st.configs, st.counts, st.devices,
                                        result);
        !s.ok()) {
      return s;
    }
    st.Lap(absl::StrFormat("pipeline baselines (%d stage solves, cost graphs built in %.3f s)", st.exact.solved(),
                           st.exact.build_seconds()));
  }
  if (thread_.joinable()) thread_.join();
  if (!st.explore_status.ok()) return st.explore_status;
  result.pipeline_configs_solved = st.explored.solved;
  result.pipeline_configs_pruned = st.explored.pruned;
  // Each stage count's best cut solved again at the accepted gap, with its stages' own graphs.
  for (auto& [p, plan] : st.explored.best_of_p) {
    auto refined = Assemble(st.exact, st.graph, st.seq, p, plan.stage_mesh, plan.micro_batches, EndsOf(plan), 0, "MAP",
                            /*real_graphs=*/true);
    if (!refined.ok()) return refined.status();
    result.pipelines.push_back(*std::move(refined));
  }
  std::stable_sort(result.pipelines.begin(), result.pipelines.end(), Faster);
  if (auto s = AdoptFasterBaseline(exact_for, st.graph, st.seq, options, result); !s.ok()) return s;
  if (!result.pipelines.empty() && result.pipelines.front().fits &&
      (options.pipeline_stages >= 2 || !result.fits || result.pipelines.front().step_seconds < result.plan.cost.step_seconds)) {
    result.pipeline = result.pipelines.front();
  }
  if (options.pipeline_stages >= 2 && !result.pipeline) {
    const int p = options.pipeline_stages;
    if (!options.pins.empty()) return PinnedPipelineDoesNotFit(result, options, st.memory_per_device);
    if (st.configs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          p, " pipeline stages need at least ", p, " micro-batches, and none of the counts searched (",
          absl::StrJoin(st.counts, ", "), ") is: give a global batch of at least ", p, ", or fewer stages"));
    }
    return absl::FailedPreconditionError(absl::StrCat("no plan with ", p, " pipeline stages of ", st.devices / p,
                                                      " devices fits ", FormatBytes(st.memory_per_device),
                                                      " per device; use more devices or stages, a smaller batch, or "
                                                      "--pipeline-stages auto"));
  }
  return absl::OkStatus();
}

}  // namespace mapd
