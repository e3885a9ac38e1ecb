// learning_per_step_bench: how much a policy's per-worker batch sizes learn
// per step, offline. Replays the batch sizes loft-sim planned (its
// iterations.csv: policy, iteration, epoch, worker, batch, ...) and trains
// the real MLP on the real Fashion-MNIST with them: per iteration every
// worker with b_i > 0 takes its next b_i samples of a seeded per-epoch
// permutation of the training set (placement is a seeded hash of the
// sample id, not by class, so a random subset stands for what the worker
// reads), computes its batch-mean gradient, and the gradients are combined
// as the agents combine them: agent::PlanRound gives the weights
// (models::AggregationWeights) and the fitted trim count, models::Reduce
// reduces the full vectors (for the coordinate-wise reducers this is
// bitwise what RingAllReduce computes), and models::Sgd applies the
// result with the spec's learning rate, momentum and schedule. Test
// accuracy (10,000 test images) every --eval-every steps, per policy and
// seed, and the median over seeds. Prints one JSON object on stdout.
//
//   learning_per_step_bench --spec SPEC --csv DIR/iterations.csv
//       [--policies loft,lbbsp,uniform] [--aggregation NAME] [--seeds 7,8,9]
//       [--steps 300] [--eval-every 25] [--data DIR] [--test-samples 10000]
//       [--trim-weights capped|count] [--period N] [--local-scale none|batch]
//
// --period N > 1: rounds of N local steps (training.exchange.period), as
// the agents' delta exchange runs them (edge_agent/model_trainer.h): each
// member takes SGD steps on its own copy from the round's start, then the
// members' deltas (parameters − start) are combined with PlanRound's
// weights (the global batch × the round's steps) and every member sets
// parameters = start + aggregate, velocity = −aggregate / Σ lr.
// --local-scale batch: a local step's gradient is scaled by b_i / (B/N)
// (B the global batch, N the members with samples), so a member with a
// small batch takes a proportionally smaller step (an experiment; the
// agents do not do this).
//
// --trim-weights: what PlanRound is given as the global batch: `capped`
// (the spec's training.global_batch: trimmed_mean averages the kept values
// with weights min(b_i, G/N)) or `count` (0: every member with samples
// counts once, the rule before the cap). Other reducers ignore it.
//
// The seed sets both the model's initial parameters and the sample
// permutation; every policy gets the same ones, so per-seed differences
// between policies come from the batch sizes alone. multi_krum and
// centered_clipping act per ring chunk in the agents, not on full
// vectors, so they are refused here.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/idx_reader.h"
#include "core/cluster_spec.h"
#include "edge_agent/ring_bytes.h"
#include "edge_agent/round_decision.h"
#include "edge_agent/trainer_state.h"
#include "models/model.h"
#include "models/reducers.h"
#include "models/sgd.h"

using namespace loft;

namespace {

// One iteration of one policy: the batch per worker (workers in the CSV's
// order of first appearance) and the epoch loft-sim counted.
struct Step {
  int64_t epoch = 0;
  std::vector<int64_t> batch;
};

// policy -> iterations in order.
using Replay = std::map<std::string, std::vector<Step>>;

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

StatusOr<Replay> LoadIterationsCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(path + ": empty file");
  const std::vector<std::string> head = Split(line, ',');
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  for (const char* need : {"policy", "iteration", "epoch", "worker", "batch"}) {
    if (!col.contains(need)) return InvalidArgument(path + ": no column '" + need + "'");
  }
  Replay r;
  std::map<std::string, std::map<std::string, size_t>> worker_index;
  int64_t row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty()) continue;
    const std::vector<std::string> f = Split(line, ',');
    if (f.size() < head.size()) {
      return InvalidArgument(path + " line " + std::to_string(row) + ": " + std::to_string(f.size()) +
                             " fields, header has " + std::to_string(head.size()));
    }
    const std::string& policy = f[col["policy"]];
    int64_t it = 0, epoch = 0, batch = 0;
    try {
      it = std::stoll(f[col["iteration"]]);
      epoch = std::stoll(f[col["epoch"]]);
      batch = std::stoll(f[col["batch"]]);
    } catch (const std::exception&) {
      return InvalidArgument(path + " line " + std::to_string(row) +
                             ": iteration, epoch or batch is not a number");
    }
    if (it < 0 || batch < 0)
      return InvalidArgument(path + " line " + std::to_string(row) + ": negative value");
    auto& idx = worker_index[policy];
    const auto [w, added] = idx.emplace(f[col["worker"]], idx.size());
    std::vector<Step>& steps = r[policy];
    if (steps.size() <= static_cast<size_t>(it)) steps.resize(static_cast<size_t>(it) + 1);
    Step& s = steps[static_cast<size_t>(it)];
    s.epoch = epoch;
    if (s.batch.size() <= w->second) s.batch.resize(w->second + 1, 0);
    s.batch[w->second] += batch;
  }
  if (r.empty()) return InvalidArgument(path + ": no rows");
  return r;
}

struct Data {
  cache::IdxDataset train, test;
  int dim = 784;
};

// Hands out the samples of a seeded permutation per epoch, in order; a new
// permutation when loft-sim's epoch changes or this one runs out.
class Sampler {
 public:
  Sampler(int64_t n, uint64_t seed) : rng_(seed), perm_(static_cast<size_t>(n)) { Reshuffle(); }
  void StartEpoch(int64_t epoch) {
    if (epoch != epoch_) {
      epoch_ = epoch;
      Reshuffle();
    }
  }
  int64_t Next() {
    if (pos_ == perm_.size()) Reshuffle();
    return perm_[pos_++];
  }

 private:
  void Reshuffle() {
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    std::shuffle(perm_.begin(), perm_.end(), rng_);
    pos_ = 0;
  }
  std::mt19937_64 rng_;
  std::vector<int64_t> perm_;
  size_t pos_ = 0;
  int64_t epoch_ = -1;
};

struct RunResult {
  std::vector<double> accuracy;  // at each eval step
};

// The next `b` samples of the sampler's permutation into img/lab.
void TakeBatch(const Data& d, int64_t b, Sampler& sampler, std::vector<uint8_t>* img,
               std::vector<uint8_t>* lab) {
  img->resize(static_cast<size_t>(b * d.dim));
  lab->resize(static_cast<size_t>(b));
  for (int64_t k = 0; k < b; ++k) {
    const int64_t id = sampler.Next();
    std::copy_n(d.train.images.begin() + id * d.dim, d.dim, img->begin() + k * d.dim);
    (*lab)[static_cast<size_t>(k)] = d.train.labels[static_cast<size_t>(id)];
  }
}

// The first `test_samples` test images.
models::BatchView TestView(const Data& d, int64_t test_samples) {
  return {std::span<const uint8_t>(d.test.images.data(), static_cast<size_t>(test_samples * d.dim)),
          std::span<const uint8_t>(d.test.labels.data(), static_cast<size_t>(test_samples))};
}

// Trains `steps` iterations of one replay; accuracy after each step in `evals`.
StatusOr<RunResult> Train(const ClusterSpec& spec, const models::ReducerOptions& base, const Data& d,
                          const std::vector<Step>& replay, int64_t steps, const std::vector<int64_t>& evals,
                          uint64_t seed, int64_t test_samples, double global_batch) {
  LOFT_ASSIGN_OR_RETURN(models::ModelKind kind, models::ParseModelKind(spec.training.model));
  LOFT_ASSIGN_OR_RETURN(auto model, models::MakeModel(kind, models::Device::kCpu));
  model->Init(seed);
  LOFT_ASSIGN_OR_RETURN(models::SgdOptions so, agent::SgdOptionsFromSpec(spec.training));
  LOFT_ASSIGN_OR_RETURN(models::Sgd sgd, models::Sgd::Create(so, model->num_params()));
  const size_t p = static_cast<size_t>(model->num_params());
  Sampler sampler(d.train.count, seed * 0x9e3779b97f4a7c15ULL + 1);
  std::vector<std::vector<float>> grads;
  std::vector<uint8_t> img, lab;
  std::vector<float> agg(p);
  const models::BatchView test = TestView(d, test_samples);
  RunResult out;
  size_t next_eval = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const Step& s = replay[static_cast<size_t>(t)];
    sampler.StartEpoch(s.epoch);
    const size_t n = s.batch.size();
    grads.resize(n);
    agent::RoundHellos hellos;
    for (size_t i = 0; i < n; ++i) {
      hellos.members.push_back(static_cast<int>(i));
      hellos.hellos.push_back(agent::MemberHello{static_cast<double>(s.batch[i]), t - 1, 0, i == 0, 0});
      grads[i].assign(p, 0.0f);
      if (s.batch[i] == 0) continue;
      TakeBatch(d, s.batch[i], sampler, &img, &lab);
      auto l = model->LossAndGradient(models::BatchView{img, lab}, grads[i]);
      if (!l.ok()) return l.status();
    }
    LOFT_ASSIGN_OR_RETURN(agent::RoundPlan plan,
                          agent::PlanRound(0, static_cast<uint32_t>(t), hellos, base, global_batch));
    std::vector<std::span<const float>> in(grads.begin(), grads.end());
    LOFT_RETURN_IF_ERROR(models::Reduce(plan.reducer, in, plan.weights, agg));
    LOFT_RETURN_IF_ERROR(sgd.Step(model->params(), agg));
    while (next_eval < evals.size() && evals[next_eval] == t + 1) {
      LOFT_ASSIGN_OR_RETURN(double acc, model->Evaluate(test));
      out.accuracy.push_back(acc);
      ++next_eval;
    }
  }
  return out;
}

// Train with rounds of `period` local steps and a delta exchange (--period).
StatusOr<RunResult> TrainRounds(const ClusterSpec& spec, const models::ReducerOptions& base, const Data& d,
                                const std::vector<Step>& replay, int64_t steps,
                                const std::vector<int64_t>& evals, uint64_t seed, int64_t test_samples,
                                double global_batch, int64_t period, bool scale_by_batch) {
  LOFT_ASSIGN_OR_RETURN(models::ModelKind kind, models::ParseModelKind(spec.training.model));
  LOFT_ASSIGN_OR_RETURN(auto model, models::MakeModel(kind, models::Device::kCpu));
  model->Init(seed);
  LOFT_ASSIGN_OR_RETURN(models::SgdOptions so, agent::SgdOptionsFromSpec(spec.training));
  LOFT_ASSIGN_OR_RETURN(models::Sgd shared, models::Sgd::Create(so, model->num_params()));
  const size_t p = static_cast<size_t>(model->num_params());
  Sampler sampler(d.train.count, seed * 0x9e3779b97f4a7c15ULL + 1);
  const size_t n = replay.empty() ? 0 : replay[0].batch.size();
  // Each member's own parameters and optimizer within a round.
  std::vector<std::vector<float>> params(n), deltas(n);
  std::vector<models::Sgd> sgd;
  for (size_t i = 0; i < n; ++i) {
    LOFT_ASSIGN_OR_RETURN(models::Sgd m, models::Sgd::Create(so, model->num_params()));
    sgd.push_back(std::move(m));
  }
  std::vector<double> round_samples(n, 0.0);
  std::vector<float> anchor(model->params().begin(), model->params().end()), grad(p), agg(p);
  std::vector<float> anchor_velocity(p, 0.0f);
  auto start_round = [&](int64_t step) -> Status {
    for (size_t i = 0; i < n; ++i) {
      params[i] = anchor;
      LOFT_RETURN_IF_ERROR(sgd[i].Restore(step, anchor_velocity));
      round_samples[i] = 0;
    }
    return OkStatus();
  };
  LOFT_RETURN_IF_ERROR(start_round(0));
  std::vector<uint8_t> img, lab;
  const models::BatchView test = TestView(d, test_samples);
  RunResult out;
  size_t next_eval = 0;
  int64_t round_start = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const Step& s = replay[static_cast<size_t>(t)];
    if (s.batch.size() != n)
      return InvalidArgument("the replay's worker count changes at step " + std::to_string(t));
    sampler.StartEpoch(s.epoch);
    int64_t with_samples = 0;
    for (int64_t b : s.batch) with_samples += b > 0 ? 1 : 0;
    for (size_t i = 0; i < n; ++i) {
      if (s.batch[i] == 0) continue;
      TakeBatch(d, s.batch[i], sampler, &img, &lab);
      std::copy(params[i].begin(), params[i].end(), model->params().begin());
      auto l = model->LossAndGradient(models::BatchView{img, lab}, grad);
      if (!l.ok()) return l.status();
      if (scale_by_batch && with_samples > 0) {
        const auto scale =
            static_cast<float>(static_cast<double>(s.batch[i]) * static_cast<double>(with_samples) /
                               static_cast<double>(spec.training.global_batch));
        for (float& g : grad) g *= scale;
      }
      LOFT_RETURN_IF_ERROR(sgd[i].Step(params[i], grad));
      round_samples[i] += static_cast<double>(s.batch[i]);
    }
    const bool ends = (t + 1 - round_start) >= period || t + 1 == steps;
    if (ends) {
      agent::RoundHellos hellos;
      for (size_t i = 0; i < n; ++i) {
        hellos.members.push_back(static_cast<int>(i));
        hellos.hellos.push_back(agent::MemberHello{round_samples[i], t - 1, 0, i == 0, 0});
        deltas[i].resize(p);
        for (size_t k = 0; k < p; ++k) deltas[i][k] = params[i][k] - anchor[k];
      }
      const double round_batch = global_batch * static_cast<double>(t + 1 - round_start);
      LOFT_ASSIGN_OR_RETURN(agent::RoundPlan plan,
                            agent::PlanRound(0, static_cast<uint32_t>(t), hellos, base, round_batch));
      std::vector<std::span<const float>> in(deltas.begin(), deltas.end());
      LOFT_RETURN_IF_ERROR(models::Reduce(plan.reducer, in, plan.weights, agg));
      double lr_sum = 0;
      for (int64_t k = round_start; k <= t; ++k) lr_sum += shared.LearningRateAt(k);
      for (size_t k = 0; k < p; ++k) {
        anchor[k] += agg[k];
        anchor_velocity[k] = lr_sum > 0 ? static_cast<float>(-static_cast<double>(agg[k]) / lr_sum) : 0.0f;
      }
      round_start = t + 1;
      LOFT_RETURN_IF_ERROR(start_round(t + 1));
    }
    while (next_eval < evals.size() && evals[next_eval] == t + 1) {
      // Between rounds the members share the round's start; mid-round the
      // evaluation is of the last round's start, as the agents evaluate.
      std::copy(anchor.begin(), anchor.end(), model->params().begin());
      LOFT_ASSIGN_OR_RETURN(double acc, model->Evaluate(test));
      out.accuracy.push_back(acc);
      ++next_eval;
    }
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 == 1 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

// Mean over iterations of the global batch B and of the equal-variance
// effective batch 1 / sum_i (w_i / W)^2 / b_i of the weights the agents
// pass (before trimming): B for sum (b_i / B) g_i, lower the more the
// weights depart from b_i.
nlohmann::json BatchProfile(const std::vector<Step>& replay, int64_t steps, models::ReducerKind kind,
                            double global_batch) {
  double sum_b = 0, sum_eff = 0, sum_min = 0;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> b(replay[static_cast<size_t>(t)].batch.begin(),
                          replay[static_cast<size_t>(t)].batch.end());
    const std::vector<double> w = models::AggregationWeights(kind, b, global_batch);
    const double W = std::accumulate(w.begin(), w.end(), 0.0);
    double inv = 0, mn = 1e300, B = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      if (w[i] <= 0) continue;
      inv += (w[i] / W) * (w[i] / W) / b[i];
      mn = std::min(mn, b[i]);
      B += b[i];
    }
    sum_b += B;
    sum_eff += inv > 0 ? 1 / inv : 0;
    sum_min += mn;
  }
  const double n = static_cast<double>(steps);
  return {{"mean_global_batch", sum_b / n},
          {"mean_effective_batch", sum_eff / n},
          {"mean_min_batch", sum_min / n}};
}

struct BenchOptions {
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  int64_t steps = 300, eval_every = 25, test_samples = 10000;
  double global_batch = 0;  // given to PlanRound; 0 = members counted once
  int64_t period = 1;       // local steps per round (1: the gradient exchange)
  bool scale_by_batch = false;
};

StatusOr<nlohmann::json> RunAll(const ClusterSpec& spec, const models::ReducerOptions& base, const Data& d,
                                const Replay& replay, const BenchOptions& o) {
  const std::vector<std::string>& policies = o.policies;
  const int64_t steps = o.steps;
  std::vector<int64_t> evals;
  for (int64_t e = o.eval_every; e <= steps; e += o.eval_every) evals.push_back(e);
  if (evals.empty() || evals.back() != steps) evals.push_back(steps);
  for (const std::string& policy : policies) {
    const auto it = replay.find(policy);
    if (it == replay.end()) return InvalidArgument("the CSV has no policy '" + policy + "'");
    if (static_cast<int64_t>(it->second.size()) < steps) {
      return InvalidArgument("policy " + policy + " has " + std::to_string(it->second.size()) +
                             " iterations, fewer than --steps " + std::to_string(steps));
    }
  }
  nlohmann::json runs = nlohmann::json::array(), med = nlohmann::json::object(),
                 prof = nlohmann::json::object();
  for (const std::string& policy : policies) {
    const auto it = replay.find(policy);
    prof[policy] = BatchProfile(it->second, steps, base.kind, o.global_batch);
    std::vector<std::vector<double>> per_seed;
    for (uint64_t seed : o.seeds) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = o.period > 1 || o.scale_by_batch
                   ? TrainRounds(spec, base, d, it->second, steps, evals, seed, o.test_samples,
                                 o.global_batch, o.period, o.scale_by_batch)
                   : Train(spec, base, d, it->second, steps, evals, seed, o.test_samples, o.global_batch);
      if (!r.ok()) return r.status().WithContext(policy + " seed " + std::to_string(seed));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "%s seed %llu: final %.4f (%.1f s)\n", policy.c_str(),
                   static_cast<unsigned long long>(seed), r->accuracy.back(), s);
      runs.push_back({{"policy", policy}, {"seed", seed}, {"accuracy", r->accuracy}, {"seconds", s}});
      per_seed.push_back(r->accuracy);
    }
    std::vector<double> m;
    for (size_t e = 0; e < evals.size(); ++e) {
      std::vector<double> v;
      for (const auto& a : per_seed) v.push_back(a[e]);
      m.push_back(Median(v));
    }
    med[policy] = m;
  }
  nlohmann::json out = {{"eval_steps", evals}, {"runs", runs}, {"median", med}, {"batch_profile", prof}};
  // loft - lbbsp per seed and of the medians, in points, when both ran.
  if (med.contains("loft") && med.contains("lbbsp")) {
    std::vector<double> gap, worst;
    for (size_t e = 0; e < evals.size(); ++e)
      gap.push_back(100 * (med["loft"][e].get<double>() - med["lbbsp"][e].get<double>()));
    out["median_loft_minus_lbbsp_points"] = gap;
    double mean_gap = 0;
    for (double g : gap) mean_gap += g / static_cast<double>(gap.size());
    out["mean_over_evals_loft_minus_lbbsp_points"] = mean_gap;
  }
  return out;
}

int Fail(const std::string& what) {
  std::cerr << "learning_per_step_bench: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"learning_per_step_bench: replay a policy's batch sizes and train the real MLP"};
  std::string spec_path, csv_path, policies_arg = "loft,lbbsp,uniform", aggregation, seeds_arg = "7,8,9";
  std::string data_dir = cache::kDefaultFashionMnistDir, trim_weights = "capped";
  BenchOptions o;
  app.add_option("--spec", spec_path, "cluster spec (training.* settings)")->required();
  app.add_option("--csv", csv_path, "loft-sim's iterations.csv")->required();
  app.add_option("--policies", policies_arg, "comma-separated policies of the CSV");
  app.add_option("--aggregation", aggregation, "override training.aggregation");
  app.add_option("--seeds", seeds_arg, "comma-separated seeds (model init and sample order)");
  app.add_option("--steps", o.steps, "iterations to train")->check(CLI::PositiveNumber);
  app.add_option("--eval-every", o.eval_every, "evaluate every N steps")->check(CLI::PositiveNumber);
  app.add_option("--test-samples", o.test_samples, "test images evaluated")->check(CLI::Range(1, 10000));
  app.add_option("--data", data_dir, "Fashion-MNIST directory");
  app.add_option("--trim-weights", trim_weights, "trimmed_mean weights: capped | count")
      ->check(CLI::IsMember({"capped", "count"}));
  std::string local_scale = "none";
  app.add_option("--period", o.period, "local steps per round (delta exchange); 1 = gradient exchange")
      ->check(CLI::Range(1, 1024));
  app.add_option("--local-scale", local_scale, "local steps' gradient scale: none | batch (b_i / (B/N))")
      ->check(CLI::IsMember({"none", "batch"}));
  CLI11_PARSE(app, argc, argv);
  o.scale_by_batch = local_scale == "batch";
  openblas_set_num_threads(1);
  auto spec = LoadClusterSpecFile(spec_path);
  if (!spec.ok()) return Fail(spec.status().ToString());
  if (!aggregation.empty()) spec->training.aggregation = aggregation;
  if (spec->training.model == "none") spec->training.model = "mlp";
  auto reducer = agent::ReducerFor(spec->training.aggregation);
  if (!reducer.ok()) return Fail("training.aggregation: " + reducer.status().ToString());
  if (reducer->kind == models::ReducerKind::kMultiKrum ||
      reducer->kind == models::ReducerKind::kCenteredClipping) {
    return Fail(spec->training.aggregation +
                " acts per ring chunk in the agents; only mean, weighted_mean, median and trimmed_mean are "
                "replayed");
  }
  for (const std::string& s : Split(seeds_arg, ',')) {
    try {
      o.seeds.push_back(std::stoull(s));
    } catch (const std::exception&) {
      return Fail("--seeds: '" + s + "' is not a number");
    }
  }
  if (o.seeds.empty()) return Fail("--seeds lists no seed");
  o.policies = Split(policies_arg, ',');
  o.global_batch = trim_weights == "capped" ? static_cast<double>(spec->training.global_batch) : 0.0;
  auto replay = LoadIterationsCsv(csv_path);
  Data d;
  auto train = cache::LoadFashionMnist(data_dir, "train");
  auto test = cache::LoadFashionMnist(data_dir, "test");
  for (const Status& st : {replay.status(), train.status(), test.status()}) {
    if (!st.ok()) return Fail(st.ToString());
  }
  d.train = std::move(*train);
  d.test = std::move(*test);
  d.dim = d.train.rows * d.train.cols;
  auto out = RunAll(*spec, *reducer, d, *replay, o);
  if (!out.ok()) return Fail(out.status().ToString());
  nlohmann::json j = {{"spec", spec_path},
                      {"csv", csv_path},
                      {"aggregation", spec->training.aggregation},
                      {"trim_weights", trim_weights},
                      {"period", o.period},
                      {"local_scale", local_scale},
                      {"global_batch", spec->training.global_batch},
                      {"learning_rate", spec->training.learning_rate},
                      {"momentum", spec->training.momentum},
                      {"seeds", o.seeds},
                      {"steps", o.steps}};
  j.update(*out);
  std::cout << j.dump() << "\n";
  return 0;
}
