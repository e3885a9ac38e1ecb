// train_bench: (1) MLP 784-256-128-10 forward+backward samples/s on one
// core next to the raw cblas_sgemm rate for exactly the same GEMM shapes,
// measured in the same run; (2) single-process reference training of the
// MLP on Fashion-MNIST with fixed hyperparameters: test accuracy per epoch,
// final accuracy and wall time. Prints one JSON object on stdout.
//
//   train_bench [--data DIR] [--epochs 8] [--batch 512] [--lr 0.1]
//               [--momentum 0.9] [--schedule cosine|constant] [--seed 1] [--skip-train]
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "cache/idx_reader.h"
#include "core/placement.h"
#include "models/in_memory_transport.h"
#include "models/model.h"
#include "models/ring_allreduce.h"
#include "models/sgd.h"

using namespace loft;
using namespace loft::models;
using SteadyClock = std::chrono::steady_clock;

namespace {

double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The GEMMs one MLP forward+backward issues (models/dense_net.cc), same
// shapes, transposes and leading dimensions.
struct Gemm {
  bool ta, tb;
  int m, n, k;
};
std::vector<Gemm> MlpGemms(int b) {
  return {
      // forward: z_l = in * W^T
      {false, true, b, 256, 784},
      {false, true, b, 128, 256},
      {false, true, b, 10, 128},
      // backward: dW = delta^T * in
      {true, false, 10, 128, b},
      {true, false, 128, 256, b},
      {true, false, 256, 784, b},
      // backward: delta_prev = delta * W (not for the first layer)
      {false, false, b, 128, 10},
      {false, false, b, 256, 128},
  };
}

struct Rate {
  double seconds_per_batch;
  double samples_per_s;
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall and this-thread CPU seconds per call. OpenBLAS runs single-threaded
// in the calling thread, so CPU time is the one-core cost even when the
// machine is shared; wall time is reported too.
struct PerCall {
  double wall_s, cpu_s;
};
template <typename F>
PerCall TimePerCall(F&& f, double min_cpu_seconds) {
  f();  // warm-up
  int calls = 0;
  const auto t0 = SteadyClock::now();
  const double c0 = ThreadCpuSeconds();
  double cpu = 0;
  do {
    f();
    ++calls;
    cpu = ThreadCpuSeconds() - c0;
  } while (cpu < min_cpu_seconds);
  return {Seconds(t0, SteadyClock::now()) / calls, cpu / calls};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loft train_bench: MLP throughput vs GEMM bound, and Fashion-MNIST reference training"};
  std::string data_dir = cache::kDefaultFashionMnistDir;
  int epochs = 8, batch = 512;
  double lr = 0.1, momentum = 0.9;
  uint64_t seed = 1;
  bool skip_train = false, skip_allreduce = false;
  int ranks = 4;
  app.add_option("--data", data_dir, "Fashion-MNIST directory (gz IDX files)");
  app.add_option("--epochs", epochs, "training epochs")->check(CLI::Range(1, 1000));
  app.add_option("--batch", batch, "batch size")->check(CLI::Range(1, 60000));
  app.add_option("--lr", lr, "peak learning rate (cosine schedule to 0)");
  app.add_option("--momentum", momentum, "SGD momentum");
  std::string schedule = "cosine";
  app.add_option("--schedule", schedule, "learning-rate schedule: constant | cosine (to 0)")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--seed", seed, "initialisation and shuffle seed");
  app.add_flag("--skip-train", skip_train, "skip the Fashion-MNIST training");
  app.add_flag("--skip-allreduce", skip_allreduce, "skip the in-memory all-reduce timing");
  app.add_option("--ranks", ranks, "ranks for the all-reduce timing")->check(CLI::Range(2, 64));
  CLI11_PARSE(app, argc, argv);

  openblas_set_num_threads(1);  // "one core"
  nlohmann::json out;
  out["blas"] = "OpenBLAS";
  out["blas_threads"] = openblas_get_num_threads();

  // ---- 1. throughput: model vs raw GEMMs, same shapes, same run ----------
  {
    auto made = MakeModel(ModelKind::kMlp, Device::kCpu);
    if (!made.ok()) {
      std::cerr << made.status() << "\n";
      return 1;
    }
    Model& model = **made;
    model.Init(seed);
    const int b = batch;
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> img(static_cast<size_t>(b) * 784), lab(b);
    for (auto& v : img) v = static_cast<uint8_t>(rng() & 0xFF);
    for (auto& v : lab) v = static_cast<uint8_t>(rng() % 10);
    std::vector<float> grad(model.num_params());
    const PerCall t_model = TimePerCall(
        [&] {
          auto r = model.LossAndGradient({img, lab}, grad);
          if (!r.ok()) std::abort();
        },
        2.0);

    const std::vector<Gemm> gemms = MlpGemms(b);
    std::vector<std::vector<float>> A, B, C;
    double flops = 0;
    for (const Gemm& g : gemms) {
      A.emplace_back(static_cast<size_t>(g.m) * g.k, 0.01f);
      B.emplace_back(static_cast<size_t>(g.k) * g.n, 0.02f);
      C.emplace_back(static_cast<size_t>(g.m) * g.n, 0.0f);
      flops += 2.0 * g.m * g.n * g.k;
    }
    const PerCall t_gemm = TimePerCall(
        [&] {
          for (size_t i = 0; i < gemms.size(); ++i) {
            const Gemm& g = gemms[i];
            const int lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
            cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                        g.m, g.n, g.k, 1.0f, A[i].data(), lda, B[i].data(), ldb, 0.0f, C[i].data(), g.n);
          }
        },
        2.0);
    nlohmann::json& t = out["throughput"];
    t["model"] = model.name();
    t["batch"] = b;
    t["timing"] = "per-thread CPU time (wall-clock figures alongside)";
    t["mlp_fwd_bwd_samples_per_s"] = b / t_model.cpu_s;
    t["mlp_fwd_bwd_ms_per_batch"] = t_model.cpu_s * 1e3;
    t["gemm_only_samples_per_s"] = b / t_gemm.cpu_s;
    t["gemm_only_ms_per_batch"] = t_gemm.cpu_s * 1e3;
    t["gemm_gflops"] = flops / t_gemm.cpu_s / 1e9;
    t["gemm_flop_per_sample"] = flops / b;
    t["fraction_of_gemm_bound"] = t_gemm.cpu_s / t_model.cpu_s;
    t["wall_mlp_fwd_bwd_samples_per_s"] = b / t_model.wall_s;
    t["wall_gemm_only_samples_per_s"] = b / t_gemm.wall_s;
  }

  // ---- 1b. RingAllReduce of one MLP gradient, in-memory transport ---------
  if (!skip_allreduce) {
    const size_t d = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
    nlohmann::json& a = out["allreduce_in_memory"];
    a["ranks"] = ranks;
    a["floats"] = d;
    a["note"] = "one thread per rank on this (shared) machine; wall ms per all-reduce incl. reducer";
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0, 1);
    std::vector<std::vector<float>> base(ranks, std::vector<float>(d));
    for (auto& v : base) {
      for (auto& x : v) x = g(rng);
    }
    for (ReducerKind kind : {ReducerKind::kMean, ReducerKind::kTrimmedMean, ReducerKind::kMedian,
                             ReducerKind::kMultiKrum, ReducerKind::kCenteredClipping}) {
      InMemoryNetwork net(ranks);
      AllReduceOptions opt;
      opt.reducer.kind = kind;
      opt.reducer.krum_f = std::max(0, (ranks - 3) / 2);
      opt.timeout_ms = 60000;
      RingView view{1, {}};
      for (int r = 0; r < ranks; ++r) view.members.push_back(r);
      constexpr int kReps = 5;
      bool ok = true;
      const auto t0 = SteadyClock::now();
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
          RingAllReduce ar(net.endpoint(r), opt);
          for (int rep = 0; rep < kReps; ++rep) {
            std::vector<float> v = base[r];
            if (!ar.Run(view, static_cast<uint32_t>(rep), v, {}).ok()) ok = false;
          }
        });
      }
      for (auto& t : threads) t.join();
      const double ms = Seconds(t0, SteadyClock::now()) * 1e3 / kReps;
      a["ms_per_allreduce"][std::string(ReducerKindName(kind))] =
          ok ? nlohmann::json(ms) : nlohmann::json("failed");
    }
  }

  // ---- 2. reference training on Fashion-MNIST --------------------------------
  if (!skip_train) {
    const auto t_load = SteadyClock::now();
    auto train = cache::LoadFashionMnist(data_dir, "train");
    auto test = cache::LoadFashionMnist(data_dir, "test");
    if (!train.ok() || !test.ok()) {
      std::cerr << (train.ok() ? test.status() : train.status()) << "\n";
      return 1;
    }
    const double load_s = Seconds(t_load, SteadyClock::now());
    auto made = MakeModel(ModelKind::kMlp, Device::kCpu);
    if (!made.ok()) return 1;
    Model& model = **made;
    model.Init(seed);
    const int64_t n = train->count;
    const int64_t steps_per_epoch = (n + batch - 1) / batch;
    SgdOptions so;
    so.learning_rate = lr;
    so.momentum = momentum;
    so.schedule = schedule == "constant" ? LrSchedule::kConstant : LrSchedule::kCosine;
    so.total_steps = steps_per_epoch * epochs;
    auto sgd = Sgd::Create(so, model.num_params());
    if (!sgd.ok()) {
      std::cerr << sgd.status() << "\n";
      return 1;
    }
    std::vector<float> grad(model.num_params());
    std::vector<uint8_t> bimg(static_cast<size_t>(batch) * 784), blab(batch);
    const BatchView test_view{test->images, test->labels};
    nlohmann::json curve = nlohmann::json::array();
    double train_s = 0, train_cpu_s = 0, time_to_85 = -1, acc = 0, last_loss = 0;
    for (int e = 0; e < epochs; ++e) {
      const std::vector<uint64_t> perm = SeededPermutation(static_cast<uint64_t>(n), seed * 1000003 + e);
      const auto t0 = SteadyClock::now();
      const double c0 = ThreadCpuSeconds();
      double loss_sum = 0;
      for (int64_t s = 0; s < steps_per_epoch; ++s) {
        const int64_t begin = s * batch, m = std::min<int64_t>(batch, n - begin);
        for (int64_t i = 0; i < m; ++i) {
          const uint64_t id = perm[begin + i];
          std::copy_n(train->images.data() + id * 784, 784, bimg.data() + i * 784);
          blab[i] = train->labels[id];
        }
        auto loss = model.LossAndGradient(
            {std::span<const uint8_t>(bimg).first(m * 784), std::span<const uint8_t>(blab).first(m)}, grad);
        if (!loss.ok() || !sgd->Step(model.params(), grad).ok()) {
          std::cerr << "training step failed\n";
          return 1;
        }
        loss_sum += *loss;
      }
      train_s += Seconds(t0, SteadyClock::now());
      train_cpu_s += ThreadCpuSeconds() - c0;
      last_loss = loss_sum / steps_per_epoch;
      acc = *model.Evaluate(test_view);
      if (time_to_85 < 0 && acc >= 0.85) time_to_85 = train_s;
      curve.push_back(
          {{"epoch", e + 1}, {"train_loss", last_loss}, {"test_accuracy", acc}, {"train_s", train_s}});
    }
    nlohmann::json& r = out["reference_training"];
    r["dataset"] = "fashion-mnist";
    r["model"] = model.name();
    r["hyperparameters"] = {{"batch", batch},       {"epochs", epochs},
                            {"schedule", schedule}, {"optimizer", "sgd"},
                            {"learning_rate", lr},  {"momentum", momentum},
                            {"schedule", "cosine"}, {"total_steps", so.total_steps},
                            {"seed", seed},         {"init", "he/xavier"}};
    r["load_s"] = load_s;
    r["train_wall_s"] = train_s;
    r["train_cpu_s"] = train_cpu_s;  // excludes per-epoch evaluation, like train_wall_s
    r["final_test_accuracy"] = acc;
    r["final_train_loss"] = last_loss;
    r["time_to_85pct_s"] = time_to_85 < 0 ? nlohmann::json(nullptr) : nlohmann::json(time_to_85);
    r["per_epoch"] = curve;
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}
