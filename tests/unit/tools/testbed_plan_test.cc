#include "tools/loftctl/testbed_plan.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "core/cluster_spec.h"
#include "tools/loftctl/testbed.h"

using namespace loft;
using namespace loft::ctl;

namespace {

const char* kSpec = R"(dataset: {samples: 4000}
training: {global_batch: 256, min_batch: 8}
nodes:
  - name: fast
    compute: {cpu_cores: 0.25}
    link: {up_mbps: 10, down_mbps: 20.5}
  - name: slow
    count: 2
    link: {up_mbps: 100, down_mbps: 100}
)";

ClusterSpec Spec(const std::string& text = kSpec) {
  auto s = ParseClusterSpec(text, "tb.yaml");
  REQUIRE(s.ok());
  return *s;
}

bool Has(const std::vector<std::vector<std::string>>& cmds, const std::vector<std::string>& want) {
  for (const auto& c : cmds)
    if (c == want) return true;
  return false;
}

}  // namespace

TEST_CASE("testbed tags are lft + 4 hex digits") {
  CHECK(IsTestbedTag("lft0a9f"));
  CHECK_FALSE(IsTestbedTag("lft0a9"));
  CHECK_FALSE(IsTestbedTag("lft0A9f"));
  CHECK_FALSE(IsTestbedTag("xyz0a9f"));
  CHECK_FALSE(IsTestbedTag("lft0a9f0"));
}

TEST_CASE("testbed plan: names, addresses, quotas") {
  auto p = PlanTestbed(Spec(), "lft12ab", 7, 2);
  REQUIRE(p.ok());
  CHECK(p->bridge == "lft12abbr");
  CHECK(p->bridge_ip == "10.213.7.1");
  REQUIRE(p->nodes.size() == 3);
  CHECK(p->nodes[0].name == "fast");
  CHECK(p->nodes[0].netns == "lft12ab-n0");
  CHECK(p->nodes[0].host_veth == "lft12abh0");
  CHECK(p->nodes[0].agent_veth == "lft12aba0");
  CHECK(p->nodes[0].ip == "10.213.7.2");
  CHECK(p->nodes[2].ip == "10.213.7.4");
  CHECK(p->nodes[0].cfs_quota_us == 2500);  // 0.25 of the 10 ms period
  CHECK(p->nodes[0].cfs_period_us == 10000);
  CHECK(p->nodes[1].cfs_quota_us == -1);  // no cpu_cores: no quota
  for (const auto& n : p->nodes) {
    CHECK(n.host_veth.size() <= 15);
    CHECK(n.agent_veth.size() <= 15);
  }
}

TEST_CASE("testbed plan: interface names fit 15 characters at the node limit") {
  std::string text =
      "dataset: {samples: 60000}\ntraining: {global_batch: 512, min_batch: 1}\n"
      "nodes:\n  - name: e\n    count: 253\n";
  auto p = PlanTestbed(Spec(text), "lftffff", 255, 2);
  REQUIRE(p.ok());
  CHECK(p->nodes.back().host_veth == "lftffffh252");
  CHECK(p->nodes.back().ip == "10.213.255.254");
  auto too_many = PlanTestbed(Spec("dataset: {samples: 60000}\ntraining: {global_batch: 512, min_batch: 1}\n"
                                   "nodes:\n  - name: e\n    count: 254\n"),
                              "lftffff", 0, 2);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() == "the testbed holds at most 253 nodes (one /24); tb.yaml has 254");
}

TEST_CASE("testbed plan: tbf up on the agent's veth, down on the bridge side") {
  auto p = PlanTestbed(Spec(), "lft12ab", 7, 2);
  REQUIRE(p.ok());
  auto cmds = p->SetupCommands();
  CHECK(cmds.front() == std::vector<std::string>{"ip", "link", "add", "lft12abbr", "type", "bridge"});
  CHECK(Has(cmds, {"ip", "link", "add", "lft12abh0", "type", "veth", "peer", "name", "lft12aba0", "netns",
                   "lft12ab-n0"}));
  CHECK(Has(cmds, {"tc", "-n", "lft12ab-n0", "qdisc", "add", "dev", "lft12aba0", "root", "handle",
                   "1:", "tbf", "rate", "10000000bit", "burst", "16384", "latency", "100ms"}));
  CHECK(Has(cmds, {"tc", "qdisc", "add", "dev", "lft12abh0", "root", "handle", "1:", "tbf", "rate",
                   "20500000bit", "burst", "16384", "latency", "100ms"}));
  // The spec's default burst rule: 2 ms of traffic, at least 16 KiB.
  CHECK(
      Has(cmds, {"tc", "-n", "lft12ab-n1", "qdisc", "add", "dev", "lft12aba1", "root", "handle", "1:", "tbf",
                 "rate", "100000000bit", "burst", "25000", "latency", "100ms"}));  // 2 ms at 12.5 MB/s
  // Each tbf queues into a pfifo_fast: low-delay packets (requests) first.
  for (const std::string i : {"0", "1"}) {
    CHECK(Has(cmds, {"tc", "-n", "lft12ab-n" + i, "qdisc", "add", "dev", "lft12aba" + i, "parent", "1:1",
                     "handle", "10:", "pfifo_fast"}));
    CHECK(Has(cmds,
              {"tc", "qdisc", "add", "dev", "lft12abh" + i, "parent", "1:1", "handle", "10:", "pfifo_fast"}));
  }
  // Their limits (txqueuelen, set before they are created): 1000 packets.
  CHECK(Has(cmds, {"ip", "-n", "lft12ab-n0", "link", "set", "lft12aba0", "txqueuelen", "1000"}));
  CHECK(Has(cmds, {"ip", "link", "set", "lft12abh0", "txqueuelen", "1000"}));
  // The child after its tbf (it attaches to the tbf's class 1:1).
  auto at = [&](const std::vector<std::string>& c) {
    return std::find(cmds.begin(), cmds.end(), c) - cmds.begin();
  };
  CHECK(at({"tc", "qdisc", "add", "dev", "lft12abh0", "parent", "1:1", "handle", "10:", "pfifo_fast"}) >
        at({"tc", "qdisc", "add", "dev", "lft12abh0", "root", "handle", "1:", "tbf", "rate", "20500000bit",
            "burst", "16384", "latency", "100ms"}));
  CHECK(at({"ip", "link", "set", "lft12abh0", "txqueuelen", "1000"}) <
        at({"tc", "qdisc", "add", "dev", "lft12abh0", "parent", "1:1", "handle", "10:", "pfifo_fast"}));
}

TEST_CASE("testbed plan: the tbf bursts follow the spec's network.burst_ms and burst_min_bytes") {
  const std::string text = std::string(kSpec) + "network: {burst_ms: 10, burst_min_bytes: 20000}\n";
  auto p = PlanTestbed(Spec(text), "lft12ab", 7, 2);
  REQUIRE(p.ok());
  CHECK(p->nodes[0].up_burst_bytes == 20000);    // 10 ms of 10 Mbit/s = 12500: the floor
  CHECK(p->nodes[0].down_burst_bytes == 25625);  // 10 ms of 20.5 Mbit/s
  CHECK(p->nodes[1].up_burst_bytes == 125000);   // 10 ms of 100 Mbit/s
  auto cmds = p->SetupCommands();
  CHECK(Has(cmds, {"tc", "-n", "lft12ab-n0", "qdisc", "add", "dev", "lft12aba0", "root", "handle",
                   "1:", "tbf", "rate", "10000000bit", "burst", "20000", "latency", "100ms"}));
  CHECK(Has(cmds, {"tc", "qdisc", "add", "dev", "lft12abh0", "root", "handle", "1:", "tbf", "rate",
                   "20500000bit", "burst", "25625", "latency", "100ms"}));
  CHECK(Has(cmds, {"tc", "-n", "lft12ab-n1", "qdisc", "add", "dev", "lft12aba1", "root", "handle",
                   "1:", "tbf", "rate", "100000000bit", "burst", "125000", "latency", "100ms"}));
}

TEST_CASE("testbed plan: a burst below one Ethernet frame is refused") {
  // Fluid links are fine in loft-sim, but tbf would drop every full frame.
  auto p =
      PlanTestbed(Spec(std::string(kSpec) + "network: {burst_ms: 0, burst_min_bytes: 0}\n"), "lft12ab", 7, 2);
  REQUIRE_FALSE(p.ok());
  CHECK(
      p.status().message() ==
      "node fast: network.burst_ms / burst_min_bytes give link.up_mbps a tbf burst of 0 bytes, less than one "
      "1514-byte Ethernet frame: tbf would drop full frames; raise network.burst_min_bytes");
}

TEST_CASE("testbed plan: the cpu_cores sum must fit the machine") {
  std::string text = R"(dataset: {samples: 4000}
training: {global_batch: 256, min_batch: 8}
nodes:
  - name: e
    count: 3
    compute: {cpu_cores: 0.75}
)";
  auto fits = PlanTestbed(Spec(text), "lft0000", 0, 4);
  CHECK(fits.ok());
  auto over = PlanTestbed(Spec(text), "lft0000", 0, 2);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message().find("sum to 2.25 but this machine has 2 CPUs") != std::string::npos);
  auto big = PlanTestbed(Spec(R"(dataset: {samples: 4000}
training: {global_batch: 256, min_batch: 8}
nodes:
  - name: e
    compute: {cpu_cores: 3}
)"),
                         "lft0000", 0, 2);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message() == "node e: compute.cpu_cores 3 exceeds this machine's 2 CPUs");
}

TEST_CASE("testbed plan: a quota under 0.1 cores gets a longer period (the kernel's quota is >= 1 ms)") {
  auto p = PlanTestbed(Spec(R"(dataset: {samples: 4000}
training: {global_batch: 256, min_batch: 8}
nodes:
  - name: tiny
    compute: {cpu_cores: 0.05}
  - name: some
    compute: {cpu_cores: 0.3}
)"),
                       "lft12ab", 7, 2);
  REQUIRE(p.ok());
  CHECK(p->nodes[0].cfs_period_us == 20000);
  CHECK(p->nodes[0].cfs_quota_us == 1000);
  CHECK(p->nodes[1].cfs_period_us == 10000);
  CHECK(p->nodes[1].cfs_quota_us == 3000);
}

// cluster run --testbed writes testbed.json from each agent's cpu.stat.
TEST_CASE("cpu.stat of cgroup v1 and v2", "[testbed]") {
  auto v1 =
      ParseCpuStat("nr_periods 120\nnr_throttled 45\nthrottled_time 2500000000\nnr_bursts 0\nburst_time 0\n");
  REQUIRE(v1.ok());
  CHECK(v1->nr_periods == 120);
  CHECK(v1->nr_throttled == 45);
  CHECK(v1->throttled_ms == Approx(2500.0));
  CHECK(v1->usage_ms == -1);  // v1's cpu controller keeps no usage
  auto v2 = ParseCpuStat(
      "usage_usec 812345\nuser_usec 600000\nsystem_usec 212345\nnr_periods 90\nnr_throttled 7\n"
      "throttled_usec 42000\n");
  REQUIRE(v2.ok());
  CHECK(v2->usage_ms == Approx(812.345));
  CHECK(v2->nr_periods == 90);
  CHECK(v2->nr_throttled == 7);
  CHECK(v2->throttled_ms == Approx(42.0));
  auto bad = ParseCpuStat("nr_periods 3\nnr_throttled lots\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("nr_throttled lots") != std::string::npos);
}

TEST_CASE("a process's CPU time from /proc/PID/stat", "[testbed]") {
  // comm with a space and a parenthesis; utime 150, stime 50 ticks at 100/s.
  const std::string line =
      "4242 (loft agent) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 50 0 0 20 0 5 0 123 456 789";
  auto ms = ParseProcStatCpuMs(line, 100);
  REQUIRE(ms.ok());
  CHECK(*ms == Approx(2000.0));
  CHECK_FALSE(ParseProcStatCpuMs("4242 (agent) S 1 2", 100).ok());
  CHECK_FALSE(ParseProcStatCpuMs("", 100).ok());
}
