// TestbedPlan: what `loftctl cluster run --testbed` / `loftctl testbed up`
// creates for a cluster spec, decided without touching the system (names,
// addresses, tc and ip commands, CPU quotas). testbed.h carries it out.
//
// Layout (docs/testbed.md): the scheduler stays in the root network
// namespace; a bridge `<tag>br` holds 10.213.<subnet>.1/24; node i gets the
// namespace `<tag>-n<i>` with the veth end `<tag>a<i>` at
// 10.213.<subnet>.<i+2>, whose peer `<tag>h<i>` is a port of the bridge. A
// tbf qdisc on `<tag>a<i>` shapes what the node sends (link.up_mbps), one
// on `<tag>h<i>` what it receives (link.down_mbps). `<tag>` is "lft" plus 4
// hex digits, unique per run: every interface name stays <= 15 characters.
//
// Not responsible for: running the commands, cgroups, state files (testbed.h).
#pragma once

#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::ctl {

inline constexpr const char* kTestbedPrefix = "lft";  // every name a testbed creates starts with it
inline constexpr int kTestbedMaxNodes = 253;          // one /24: .1 bridge, .2 … .254 nodes
// tbf drops a packet larger than its bucket: a shaped link's burst must
// hold one full Ethernet frame (1500 MTU + 14 header bytes).
inline constexpr int64_t kTbfMinBurstBytes = 1514;
// The limit of each link's priority queue (pfifo_fast takes its veth's
// txqueuelen when it is created; set explicitly before). Packets, not
// bytes: TCP hands the qdisc segments of up to 64 KB.
inline constexpr int kTestbedQueuePackets = 1000;

struct TestbedNode {
  std::string name;        // the spec's node name
  std::string netns;       // <tag>-n<i>
  std::string host_veth;   // <tag>h<i>, bridge port (tbf: down_mbps)
  std::string agent_veth;  // <tag>a<i>, inside netns (tbf: up_mbps)
  std::string ip;          // 10.213.<subnet>.<i+2>
  std::string cgroup;      // n<i>, relative to the run's cgroup directory
  double up_mbps = 0;
  double down_mbps = 0;
  // The tbf bursts: LinkBurstBytes(spec.network, rate) rounded up to whole
  // bytes (defaults: 2 ms of traffic for timer slack, at least 16 KiB).
  int64_t up_burst_bytes = 0;
  int64_t down_burst_bytes = 0;
  double cpu_cores = 0;  // 0 = no quota
  int64_t cfs_quota_us = -1;
  int64_t cfs_period_us = kCfsPeriodUs;
};

struct TestbedPlan {
  std::string tag;     // lftXXXX
  int subnet = 0;      // third octet of 10.213.<subnet>.0/24
  std::string bridge;  // <tag>br
  std::string bridge_ip;
  std::vector<TestbedNode> nodes;

  // ip/tc argument vectors that build the testbed, in order.
  std::vector<std::vector<std::string>> SetupCommands() const;
};

// True for a well-formed tag ("lft" + 4 lower-case hex digits).
bool IsTestbedTag(const std::string& tag);

// `machine_cpus`: CPUs this process may use; the spec's cpu_cores must sum
// to at most that. Errors name the node or the limit that does not fit
// (also a link whose burst, from the spec's network.burst_*, is below
// kTbfMinBurstBytes).
StatusOr<TestbedPlan> PlanTestbed(const ClusterSpec& spec, const std::string& tag, int subnet,
                                  int machine_cpus);

}  // namespace loft::ctl
