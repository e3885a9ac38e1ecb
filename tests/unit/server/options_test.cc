#include "server/options.h"

#include <catch2/catch.hpp>

using loft::server::ParseSchedulerOptions;
using loft::server::SchedulerOptions;

namespace {

// The error message of parsing `yaml` as "s.yaml"; fails the test if it parses.
std::string ParseError(const std::string& yaml) {
  SchedulerOptions o;
  auto st = ParseSchedulerOptions(yaml, "s.yaml", &o);
  INFO(yaml);
  REQUIRE_FALSE(st.ok());
  return st.message();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("scheduler options parse every key and keep defaults for the rest") {
  SchedulerOptions o;
  REQUIRE(
      ParseSchedulerOptions("cluster_spec: c.yaml\npolicy: pid\nbind: tcp://0.0.0.0:7000\n"
                            "heartbeat_timeout_ms: 900\nkeys_dir: /k\nmetrics_port: 9000\n"
                            "iterations: 12\nmin_workers: 3\nstart_when_ready: true\njournal_sync: false\n"
                            "plan_ahead: 0\njournal_snapshot_every: 500\nepoch_overlap: false\n",
                            "s.yaml", &o)
          .ok());
  CHECK(o.cluster_spec == "c.yaml");
  CHECK(o.policy == "pid");
  CHECK(o.bind == "tcp://0.0.0.0:7000");
  CHECK(o.heartbeat_timeout_ms == 900);
  CHECK(o.heartbeat_interval_ms == 0);  // the cluster spec's (TakeSpecDefaults)
  CHECK(o.metrics_port == 9000);
  CHECK(o.iterations == 12);
  CHECK(o.min_workers == 3);
  CHECK(o.start_when_ready);
  CHECK_FALSE(o.journal_sync);
  CHECK(o.plan_ahead == 0);
  CHECK(o.journal_snapshot_every == 500);
  CHECK_FALSE(o.epoch_overlap);
  CHECK(o.Validate().ok());
  SchedulerOptions defaults;
  CHECK(defaults.journal_snapshot_every == 10000);
  CHECK(defaults.epoch_overlap);
}

TEST_CASE("scheduler options reject unknown keys and bad values, naming them") {
  const std::string typo = ParseError("cluster_spec: c.yaml\nheartbeat_timout_ms: 3\n");
  CHECK(Has(typo, "s.yaml:2"));
  CHECK(Has(typo, "heartbeat_timout_ms"));
  CHECK(Has(ParseError("metrics_port: many\n"), "metrics_port"));
  CHECK(Has(ParseError("epoch_overlap: sometimes\n"), "s.yaml:1: epoch_overlap"));
  for (const char* bad : {"plan_ahead: 4\n", "plan_ahead: soon\n", "plan_ahead: -1\n"})
    CHECK(Has(ParseError(bad), "s.yaml:1: plan_ahead"));
  SchedulerOptions o;
  o.plan_ahead = 0;
  REQUIRE(ParseSchedulerOptions("plan_ahead: auto\n", "s.yaml", &o).ok());
  CHECK(o.plan_ahead == -1);
  REQUIRE(ParseSchedulerOptions("plan_ahead: 2\n", "s.yaml", &o).ok());
  CHECK(o.plan_ahead == 2);
  // journal_snapshot_every: a count of entries, >= 0 (0 = never).
  const std::string negative = ParseError("policy: loft\njournal_snapshot_every: -5\n");
  CHECK(Has(negative, "s.yaml:2: journal_snapshot_every must be >= 0"));
  CHECK(Has(negative, "-5"));
  for (const char* bad :
       {"journal_snapshot_every: often\n", "journal_snapshot_every: 1.5\n", "journal_snapshot_every: [1]\n"})
    CHECK(Has(ParseError(bad), "s.yaml:1: journal_snapshot_every"));
  CHECK(Has(ParseError("start_peers_wait_ms: -1\n"), "s.yaml:1: start_peers_wait_ms must be >= 0"));
  CHECK(Has(ParseError("policy: loft\ncontrol_tos: 256\n"),
            "s.yaml:2: control_tos must be an IP type-of-service byte"));
  CHECK(Has(ParseError("control_tos: low\n"), "s.yaml:1: control_tos"));
  REQUIRE(ParseSchedulerOptions("journal_snapshot_every: 0\n", "s.yaml", &o).ok());
  CHECK(o.journal_snapshot_every == 0);
  o.cluster_spec = "c.yaml";
  o.keys_dir = "/k";
  REQUIRE(o.Validate().ok());
  o.journal_snapshot_every = -1;
  CHECK(Has(o.Validate().message(), "journal_snapshot_every must be >= 0"));
  o.journal_snapshot_every = 0;
  CHECK(SchedulerOptions{}.control_tos == 0x10);
  o.control_tos = -3;
  CHECK(Has(o.Validate().message(), "control_tos must be an IP type-of-service byte 0..255"));
}

TEST_CASE("insecure is only allowed on loopback and keys are required otherwise") {
  SchedulerOptions o;
  o.cluster_spec = "c.yaml";
  o.bind = "tcp://0.0.0.0:7700";
  o.insecure = true;
  CHECK(o.Validate().code() == loft::StatusCode::kPermissionDenied);
  o.bind = "tcp://127.0.0.1:7700";
  CHECK(o.Validate().ok());
  o.insecure = false;
  CHECK_FALSE(o.Validate().ok());  // no keys_dir
  o.keys_dir = "/etc/loft/keys";
  CHECK(o.Validate().ok());
  o.heartbeat_interval_ms = 500;
  o.heartbeat_timeout_ms = o.heartbeat_interval_ms;
  CHECK_FALSE(o.Validate().ok());
}

// One default per figure: the daemon's heartbeat interval and timeout
// default to the cluster spec's scheduler section, the figures loftctl and
// loft-sim use.
TEST_CASE("scheduler options take the spec's heartbeat figures where they are 0") {
  SchedulerOptions o;
  loft::SchedulerSpec spec;
  REQUIRE(o.TakeSpecDefaults(spec).ok());
  CHECK(o.heartbeat_interval_ms == 250);
  CHECK(o.heartbeat_timeout_ms == 1500);
  SchedulerOptions set;
  set.heartbeat_timeout_ms = 4000;  // an explicit figure is kept
  REQUIRE(set.TakeSpecDefaults(spec).ok());
  CHECK(set.heartbeat_interval_ms == 250);
  CHECK(set.heartbeat_timeout_ms == 4000);
  SchedulerOptions bad;
  spec.heartbeat_timeout_ms = 0;  // loft-sim's "noticed at once": no daemon timeout
  const auto st = bad.TakeSpecDefaults(spec);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("heartbeat_timeout_ms") != std::string::npos);
}

TEST_CASE("scheduler options take the spec's partition timeout where it is 0, an explicit one wins") {
  SchedulerOptions o;
  CHECK(o.partition_timeout_ms == 0);
  loft::SchedulerSpec spec;
  spec.partition_timeout_ms = 60000;
  REQUIRE(o.TakeSpecDefaults(spec).ok());
  CHECK(o.partition_timeout_ms == 60000);
  SchedulerOptions set;
  set.partition_timeout_ms = 3000;
  REQUIRE(set.TakeSpecDefaults(spec).ok());
  CHECK(set.partition_timeout_ms == 3000);
  // The spec's 0 (never) stays 0: the driver's timeout_min_ms 0.
  SchedulerOptions never;
  spec.partition_timeout_ms = 0;
  REQUIRE(never.TakeSpecDefaults(spec).ok());
  CHECK(never.partition_timeout_ms == 0);
  // Only a negative figure is refused.
  SchedulerOptions neg;
  neg.cluster_spec = "c.yaml";
  neg.insecure = true;  // on the default loopback bind: no keys needed
  CHECK(neg.Validate().ok());
  neg.partition_timeout_ms = -1;
  const auto st = neg.Validate();
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("partition_timeout_ms") != std::string::npos);
}

TEST_CASE("scheduler options written as YAML read back to the same struct") {
  SchedulerOptions o;
  o.cluster_spec = "/tmp/a spec: with colon.yaml";
  o.policy = "loft-epoch";
  o.bind = "tcp://127.0.0.1:7100";
  o.journal_dir = "/tmp/j";
  o.heartbeat_interval_ms = 250;
  o.heartbeat_timeout_ms = 1500;
  o.partition_timeout_ms = 60000;
  o.keys_dir = "/k";
  o.insecure = true;
  o.metrics_port = 9100;
  o.iterations = 32;
  o.min_workers = 2;
  o.start_when_ready = true;
  o.start_peers_wait_ms = 2500;
  o.journal_sync = false;
  o.log_level = "warn";
  o.max_message_bytes = 1 << 20;
  o.metrics_address = "0.0.0.0";
  o.manifest = "/m/MANIFEST.loft";
  o.journal_snapshot_every = 123;
  o.epoch_overlap = false;
  o.control_tos = 0;
  // Every field: each one the YAML writer or the parser forgets fails here.
#define CHECK_SAME(field) CHECK(back.field == o.field)
  for (int plan_ahead : {-1, 0, 1, 2, 3}) {
    o.plan_ahead = plan_ahead;
    SchedulerOptions back;
    REQUIRE(ParseSchedulerOptions(loft::server::SchedulerOptionsToYaml(o), "gen", &back).ok());
    CHECK_SAME(cluster_spec);
    CHECK_SAME(policy);
    CHECK_SAME(bind);
    CHECK_SAME(journal_dir);
    CHECK_SAME(heartbeat_interval_ms);
    CHECK_SAME(heartbeat_timeout_ms);
    CHECK_SAME(partition_timeout_ms);
    CHECK_SAME(keys_dir);
    CHECK_SAME(insecure);
    CHECK_SAME(metrics_port);
    CHECK_SAME(start_when_ready);
    CHECK_SAME(start_peers_wait_ms);
    CHECK_SAME(metrics_address);
    CHECK_SAME(iterations);
    CHECK_SAME(min_workers);
    CHECK_SAME(journal_sync);
    CHECK_SAME(plan_ahead);
    CHECK_SAME(log_level);
    CHECK_SAME(max_message_bytes);
    CHECK_SAME(manifest);
    CHECK_SAME(journal_snapshot_every);
    CHECK_SAME(epoch_overlap);
    CHECK_SAME(control_tos);
  }
}
#undef CHECK_SAME
