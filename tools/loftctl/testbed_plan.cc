#include "tools/loftctl/testbed_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace loft::ctl {

bool IsTestbedTag(const std::string& tag) {
  if (tag.size() != 7 || tag.rfind(kTestbedPrefix, 0) != 0) return false;
  return std::all_of(tag.begin() + 3, tag.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

namespace {

// tc's rate in bit/s (tc accepts "bit"), exact for fractional Mbit/s.
std::string TcRate(double mbps) {
  return fmt::format("{}bit", static_cast<int64_t>(std::llround(mbps * 1e6)));
}

// "tc" in the namespace `netns` (empty: the root namespace).
std::vector<std::string> Tc(const std::string& netns) {
  if (netns.empty()) return {"tc"};
  return {"tc", "-n", netns};
}

std::vector<std::string> Tbf(const std::string& netns, const std::string& dev, double mbps,
                             int64_t burst_bytes) {
  std::vector<std::string> c = Tc(netns);
  // Handle 1: for the priority queue below (PriorityQueue), which replaces
  // tbf's own FIFO (whose limit latency 100 ms would set).
  c.insert(c.end(), {"qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", TcRate(mbps), "burst",
                     std::to_string(burst_bytes), "latency", "100ms"});
  return c;
}

// The tbf's queue: pfifo_fast, whose band 0 (IP type of service 0x10, low
// delay: the agents' requests, the ACKs of what they fetch, the scheduler's
// messages) goes before band 1 (everything else, e.g. the records a node
// serves). With tbf's own FIFO a node's requests waited behind the records
// it serves on its uplink (tens of ms on a 2-5 Mbit/s link), which loft-sim,
// sending requests outside the links, does not charge (docs/testbed.md
// "Priority for requests"). Its limit is the veth's txqueuelen, read when
// it is created: kTestbedQueuePackets, set before. A limit of about tbf's
// own (100 ms of the rate, ~53 frames at 5 Mbit/s) dropped 3 of every 4
// segments of the all-reduce's bursts and made training on edge-bandwidth
// 17 % slower than tbf's FIFO; 1000 drops none of them.
std::vector<std::string> PriorityQueue(const std::string& netns, const std::string& dev) {
  std::vector<std::string> c = Tc(netns);
  c.insert(c.end(), {"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo_fast"});
  return c;
}

}  // namespace

std::vector<std::vector<std::string>> TestbedPlan::SetupCommands() const {
  std::vector<std::vector<std::string>> cmds;
  cmds.push_back({"ip", "link", "add", bridge, "type", "bridge"});
  cmds.push_back({"ip", "addr", "add", bridge_ip + "/24", "dev", bridge});
  cmds.push_back({"ip", "link", "set", bridge, "up"});
  for (const auto& n : nodes) {
    cmds.push_back({"ip", "netns", "add", n.netns});
    cmds.push_back(
        {"ip", "link", "add", n.host_veth, "type", "veth", "peer", "name", n.agent_veth, "netns", n.netns});
    cmds.push_back({"ip", "link", "set", n.host_veth, "master", bridge, "up"});
    cmds.push_back({"ip", "-n", n.netns, "addr", "add", n.ip + "/24", "dev", n.agent_veth});
    cmds.push_back({"ip", "-n", n.netns, "link", "set", n.agent_veth, "up"});
    cmds.push_back({"ip", "-n", n.netns, "link", "set", "lo", "up"});
    const std::string qlen = std::to_string(kTestbedQueuePackets);
    cmds.push_back({"ip", "-n", n.netns, "link", "set", n.agent_veth, "txqueuelen", qlen});
    cmds.push_back({"ip", "link", "set", n.host_veth, "txqueuelen", qlen});
    cmds.push_back(Tbf(n.netns, n.agent_veth, n.up_mbps, n.up_burst_bytes));
    cmds.push_back(PriorityQueue(n.netns, n.agent_veth));
    cmds.push_back(Tbf("", n.host_veth, n.down_mbps, n.down_burst_bytes));
    cmds.push_back(PriorityQueue("", n.host_veth));
  }
  return cmds;
}

StatusOr<TestbedPlan> PlanTestbed(const ClusterSpec& spec, const std::string& tag, int subnet,
                                  int machine_cpus) {
  if (!IsTestbedTag(tag)) return InvalidArgument("testbed tag '" + tag + "' is not lft + 4 hex digits");
  if (subnet < 0 || subnet > 255)
    return InvalidArgument(fmt::format("testbed subnet {} not in 0..255", subnet));
  if (spec.num_nodes() > kTestbedMaxNodes) {
    return InvalidArgument(fmt::format("the testbed holds at most {} nodes (one /24); {} has {}",
                                       kTestbedMaxNodes, spec.source, spec.num_nodes()));
  }
  TestbedPlan p;
  p.tag = tag;
  p.subnet = subnet;
  p.bridge = tag + "br";
  p.bridge_ip = fmt::format("10.213.{}.1", subnet);
  double cores = 0;
  for (int i = 0; i < spec.num_nodes(); ++i) {
    const NodeSpec& ns = spec.nodes[i];
    TestbedNode n;
    n.name = ns.name;
    n.netns = fmt::format("{}-n{}", tag, i);
    n.host_veth = fmt::format("{}h{}", tag, i);
    n.agent_veth = fmt::format("{}a{}", tag, i);
    n.ip = fmt::format("10.213.{}.{}", subnet, i + 2);
    n.cgroup = fmt::format("n{}", i);
    n.up_mbps = ns.link.up_mbps;
    n.down_mbps = ns.link.down_mbps;
    n.up_burst_bytes = static_cast<int64_t>(std::ceil(LinkBurstBytes(spec.network, n.up_mbps)));
    n.down_burst_bytes = static_cast<int64_t>(std::ceil(LinkBurstBytes(spec.network, n.down_mbps)));
    for (auto [key, burst] :
         {std::pair{"up_mbps", n.up_burst_bytes}, std::pair{"down_mbps", n.down_burst_bytes}}) {
      if (burst < kTbfMinBurstBytes) {
        return InvalidArgument(fmt::format(
            "node {}: network.burst_ms / burst_min_bytes give link.{} a tbf burst of {} bytes, less than one "
            "{}-byte Ethernet frame: tbf would drop full frames; raise network.burst_min_bytes",
            ns.name, key, burst, kTbfMinBurstBytes));
      }
    }
    n.cpu_cores = ns.compute.cpu_cores;
    if (n.cpu_cores > 0) {
      // The kernel's smallest quota is 1 ms per period (and largest period 1 s).
      n.cfs_period_us = CfsPeriodUs(n.cpu_cores);
      n.cfs_quota_us =
          std::max<int64_t>(1000, std::llround(n.cpu_cores * static_cast<double>(n.cfs_period_us)));
      if (n.cpu_cores > machine_cpus) {
        return InvalidArgument(fmt::format("node {}: compute.cpu_cores {} exceeds this machine's {} CPUs",
                                           ns.name, n.cpu_cores, machine_cpus));
      }
    }
    cores += n.cpu_cores;
    p.nodes.push_back(std::move(n));
  }
  if (cores > machine_cpus + 1e-9) {
    return InvalidArgument(fmt::format(
        "the nodes' compute.cpu_cores sum to {:.3g} but this machine has {} CPUs: the quotas would not be "
        "met; lower them or use a larger machine",
        cores, machine_cpus));
  }
  return p;
}

}  // namespace loft::ctl
