// loftctl calibrate RUN_DIR --out SPEC.yaml [--spec SPEC]: a spec whose
// per-node constants are the scheduler's fitted cost models of a run
// (tools/loftctl/calibrate.h, docs/testbed.md "Calibration").
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "core/cluster_spec.h"
#include "server/options.h"
#include "tools/loftctl/calibrate.h"
#include "tools/loftctl/commands.h"

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

StatusOr<std::string> Slurp(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return NotFound("cannot open " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The run's scheduler.yaml (written by cluster run), read by the
// scheduler's own loader over `base` (keys absent from the file keep
// base's values).
StatusOr<server::SchedulerOptions> RunSchedulerOptions(const fs::path& run_dir,
                                                       server::SchedulerOptions base = {}) {
  LOFT_RETURN_IF_ERROR(server::LoadSchedulerOptionsFile((run_dir / "scheduler.yaml").string(), &base));
  return base;
}

// The cluster_spec of the run's scheduler.yaml.
StatusOr<std::string> RunSpecPath(const fs::path& run_dir) {
  LOFT_ASSIGN_OR_RETURN(const server::SchedulerOptions so, RunSchedulerOptions(run_dir));
  if (!so.cluster_spec.empty()) return so.cluster_spec;
  return NotFound((run_dir / "scheduler.yaml").string() + " names no cluster_spec; pass --spec");
}

// The run's heartbeat settings (scheduler.yaml) into the calibrated spec:
// loft-sim notices a death when the daemon would.
Status CopyHeartbeat(const fs::path& run_dir, ClusterSpec* spec, std::vector<std::string>* notes) {
  if (!fs::exists(run_dir / "scheduler.yaml")) return OkStatus();
  server::SchedulerOptions base;  // keys absent from the file keep the spec's values
  base.heartbeat_interval_ms = std::llround(spec->scheduler.heartbeat_interval_ms);
  base.heartbeat_timeout_ms = std::llround(spec->scheduler.heartbeat_timeout_ms);
  LOFT_ASSIGN_OR_RETURN(server::SchedulerOptions so, RunSchedulerOptions(run_dir, base));
  // 0 in the file: the daemon took the spec's (SchedulerOptions::TakeSpecDefaults).
  if (so.heartbeat_interval_ms == 0) so.heartbeat_interval_ms = base.heartbeat_interval_ms;
  if (so.heartbeat_timeout_ms == 0) so.heartbeat_timeout_ms = base.heartbeat_timeout_ms;
  // The cluster spec's own rules: interval > 0, timeout >= 0.
  if (so.heartbeat_interval_ms <= 0)
    return InvalidArgument(fmt::format("{}: heartbeat_interval_ms must be > 0, got {}",
                                       (run_dir / "scheduler.yaml").string(), so.heartbeat_interval_ms));
  if (so.heartbeat_timeout_ms < 0)
    return InvalidArgument(fmt::format("{}: heartbeat_timeout_ms must be >= 0, got {}",
                                       (run_dir / "scheduler.yaml").string(), so.heartbeat_timeout_ms));
  spec->scheduler.heartbeat_interval_ms = static_cast<double>(so.heartbeat_interval_ms);
  spec->scheduler.heartbeat_timeout_ms = static_cast<double>(so.heartbeat_timeout_ms);
  notes->push_back(
      fmt::format("scheduler.heartbeat_interval_ms {:.4g}, heartbeat_timeout_ms {:.4g} (the run's)",
                  spec->scheduler.heartbeat_interval_ms, spec->scheduler.heartbeat_timeout_ms));
  return OkStatus();
}

// Whether the run's agents enforced the spec's link rates: every agent
// config cluster run wrote (agent-*.yaml) has link_emulation true (token
// buckets, or the testbed's tbf with the agents' latency).
bool LinksEnforced(const fs::path& run_dir) {
  int agents = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("agent-", 0) != 0 || e.path().extension() != ".yaml") continue;
    auto text = Slurp(e.path());
    if (!text.ok() || text->find("link_emulation: true") == std::string::npos) return false;
    ++agents;
  }
  return agents > 0;
}

Status Calibrate(const std::string& run, const std::string& spec_arg, const std::string& out,
                 const std::string& links) {
  fs::path run_dir(run);
  std::string spec_path = spec_arg;
  if (spec_path.empty()) {
    LOFT_ASSIGN_OR_RETURN(spec_path, RunSpecPath(run_dir));
  }
  LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpecFile(spec_path));
  std::vector<std::string> hb_notes;
  LOFT_RETURN_IF_ERROR(CopyHeartbeat(run_dir, &spec, &hb_notes));
  fs::path status_path = run_dir / "status.json";
  LOFT_ASSIGN_OR_RETURN(std::string text, Slurp(status_path));
  auto status = nlohmann::json::parse(text, nullptr, false);
  if (status.is_discarded()) return DataLoss(status_path.string() + " is not valid JSON");
  // A failed run (cluster run marks it and removes its results) is cut
  // short: its profiles and rows would calibrate on what the job never did.
  if (status.is_object() && status.value("failed", false))
    return FailedPrecondition(fmt::format("{}: the run failed ({}); calibrate from a run that completed",
                                          status_path.string(),
                                          status.value("error", std::string("no error given"))));
  // iterations.csv: the all-reduce and the scheduler overhead (optional:
  // a run dir without it keeps the spec's values, with a note).
  const fs::path csv_path = run_dir / "iterations.csv";
  std::optional<std::string> csv;
  if (fs::exists(csv_path)) {
    LOFT_ASSIGN_OR_RETURN(std::string c, Slurp(csv_path));
    csv = std::move(c);
  } else {
    std::fprintf(stderr, "%s: not found; all-reduce and scheduler overhead kept from the spec\n",
                 csv_path.c_str());
  }
  // training.csv: the evaluated steps (training.eval.relative_cost).
  const fs::path training_path = run_dir / "training.csv";
  std::optional<std::string> training;
  if (csv && fs::exists(training_path)) {
    LOFT_ASSIGN_OR_RETURN(std::string t, Slurp(training_path));
    training = std::move(t);
  }
  bool fit_links = links == "fit";
  if (links == "auto") {
    fit_links = !LinksEnforced(run_dir);
    std::fprintf(stderr, "--links auto: %s\n",
                 fit_links
                     ? "the run's links were not emulated: fitting them"
                     : "the run's agents enforced the spec's links (emulation or testbed): keeping them");
  }
  LOFT_ASSIGN_OR_RETURN(
      Calibration cal,
      CalibrateSpec(spec, status, status_path.string(), csv ? &*csv : nullptr, csv_path.string(), fit_links,
                    /*match_ring=*/true, training ? &*training : nullptr, training_path.string()));
  std::string head = fmt::format(
      "# Calibrated by `loftctl calibrate {}` from the scheduler's fitted cost models\n"
      "# (policy {}, {} iterations) of a run of {}.\n",
      run, status.value("policy", "?"), status.value("iteration", int64_t{-1}) + 1, spec_path);
  cal.notes.insert(cal.notes.end(), hb_notes.begin(), hb_notes.end());
  for (const auto& n : cal.notes) head += "#   " + n + "\n";
  std::ofstream f(out, std::ios::trunc);
  f << head << cal.yaml;
  f.close();
  if (!f) return IOError("cannot write " + out);
  for (const auto& n : cal.notes) std::fprintf(stderr, "%s\n", n.c_str());
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return OkStatus();
}

}  // namespace

void RegisterCalibrateCommands(CLI::App& app, int* exit_code) {
  auto* cal =
      app.add_subcommand("calibrate", "write a spec whose node constants are a run's fitted cost models");
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto spec = std::make_shared<std::string>();
  cal->add_option("run_dir", *run, "a `loftctl cluster run` output directory (status.json, scheduler.yaml)")
      ->required();
  cal->add_option("--out", *out, "calibrated spec to write")->required();
  cal->add_option("--spec", *spec, "the run's spec (default: scheduler.yaml's cluster_spec)");
  auto links = std::make_shared<std::string>("auto");
  cal->add_option(
         "--links", *links,
         "link constants: fit (the fitted laws), spec (keep the spec's), auto (spec when the run's agents "
         "enforced the spec's links, else fit)")
      ->check(CLI::IsMember({"auto", "fit", "spec"}))
      ->capture_default_str();
  cal->callback([=] {
    if (Status st = Calibrate(*run, *spec, *out, *links); !st.ok()) {
      std::fprintf(stderr, "loftctl calibrate: %s\n", st.ToString().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace loft::ctl
