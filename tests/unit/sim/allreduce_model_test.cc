#include "sim/allreduce_model.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "core/cluster_spec.h"
#include "core/read_ahead.h"
#include "models/chunk_codec.h"
#include "sim/simulator.h"

using namespace loft;
using namespace loft::sim;

namespace {

ClusterSpec Spec(const std::string& training, std::string extra = "") {
  // Fluid links (no token-bucket bursts) for the formulas below.
  if (const size_t at = extra.find("network: {");
      at != std::string::npos && extra.find("burst") == std::string::npos)
    extra.insert(at + 10, "burst_ms: 0, burst_min_bytes: 0, ");
  // No ACKs on the ring's links unless the test sets them.
  if (const size_t at = extra.find("network: {");
      at != std::string::npos && extra.find("ack_bytes_per_byte") == std::string::npos)
    extra.insert(at + 10, "ack_bytes_per_byte: 0, ");
  const std::string text =
      "dataset: {name: d, samples: 2000, sample_bytes: 784}\n"
      "training: {global_batch: 64, min_batch: 1, iterations: 5, seed: 3, " +
      training + "}\n" + extra +
      // The ideal links of the formulas below unless a test sets its own.
      (extra.find("network:") == std::string::npos
           ? "network: {packet_efficiency: 1, record_overhead_bytes: 0, burst_ms: 0, burst_min_bytes: 0, "
             "ack_bytes_per_byte: 0, request_bytes: 0, report_bytes: 0, assignment_bytes: 0}\n"
           : "") +
      "nodes:\n"
      "  - name: a\n    compute: {fixed_ms: 1, per_sample_ms: 0.01}\n"
      "    link: {up_mbps: 100, down_mbps: 100, latency_ms: 1}\n"
      "  - name: b\n    compute: {fixed_ms: 1, per_sample_ms: 0.01}\n"
      "    link: {up_mbps: 10, down_mbps: 100, latency_ms: 3}\n"
      "  - name: c\n    compute: {fixed_ms: 1, per_sample_ms: 0.01}\n"
      "    link: {up_mbps: 100, down_mbps: 50, latency_ms: 2}\n";
  auto s = ParseClusterSpec(text, "ar.yaml");
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return *s;
}

// uniform without plan-ahead (auto would plan ahead to hide the spec's
// default hand-off).
SimResult RunUniform(const ClusterSpec& s) {
  SimOptions o;
  o.policy = "uniform";
  o.plan_ahead = 0;
  auto r = RunPolicy(s, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("parameter priors are the agent's default models") {
  CHECK(ModelParameterCount("mlp", 784) == 235146);  // the figure the agents all-reduce
  CHECK(ModelParameterCount("softmax", 784) == 7850);
  CHECK(ModelParameterCount("none", 784) == 0);
  CHECK(PriorReduceNsPerElement("mean") < PriorReduceNsPerElement("median"));
}

TEST_CASE("no model, no all-reduce") {
  AllreduceModel m(Spec("model: none"));
  CHECK_FALSE(m.enabled());
  std::vector<int32_t> all{0, 1, 2};
  CHECK(m.RingMs(all) == 0);
}

TEST_CASE(
    "exchange time: a hello, 2 phases of N-1 pair payloads per member at its link with its latency, "
    "reducer") {
  ClusterSpec s =
      Spec("model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 100, fixed_ms: 0.5}");
  AllreduceModel m(s);
  REQUIRE(m.enabled());
  std::vector<int32_t> all{0, 1, 2};
  // chunk = 1000 floats = 4000 bytes; per phase each member sends 2 and
  // receives 2, at min(up, down): a 100, b 10, c 50 Mbit/s. Each member's
  // largest link latency, max(its, the others'): 3 for all (b's).
  const double a_ms = 2 * 4000.0 * 8 / (100 * 1000.0);  // 0.64 ms
  const double b_ms = 2 * 4000.0 * 8 / (10 * 1000.0);   // 6.4 ms, the slowest
  const double c_ms = 2 * 4000.0 * 8 / (50 * 1000.0);   // 1.28 ms
  CHECK(m.MemberTransferMs(3, 0, 0) == Approx(a_ms));
  CHECK(m.MemberTransferMs(3, 1, 1) == Approx(b_ms));
  CHECK(m.MemberTransferMs(3, 2, 0) == Approx(c_ms));
  CHECK(m.MemberLatencyMs(all, 0) == Approx(3.0));
  CHECK(m.MemberLatencyMs(all, 2) == Approx(3.0));
  const double phase = b_ms + 3;
  CHECK(m.PhaseMs(all, 0) == Approx(phase));
  CHECK(m.TransferMs(all) == Approx(2 * b_ms));
  CHECK(m.HelloMs(all) == Approx(3.0));  // the members' largest latency
  CHECK(m.LatencyMs(all) == Approx(2 * 3.0 + 3.0));
  CHECK(m.ReduceElements(3) == Approx(2000));
  CHECK(m.RingMs(all) == Approx(2 * phase + 3.0 + 2000 * 100 / 1e6 + 0.5));
  CHECK(m.LinkLatencyMs(0, 2) == Approx(2.0));
  // Without b the slow link is gone: a and c each send one 6000-byte
  // payload, c at 50 Mbit/s; latency max(1, 2) = 2.
  std::vector<int32_t> ac{0, 2};
  CHECK(m.TransferMs(ac) == Approx(2 * (6000.0 * 8 / (50 * 1000.0))));
  CHECK(m.RingMs(ac) == Approx(2 * (6000.0 * 8 / (50 * 1000.0) + 2) + 2 + 1500 * 100 / 1e6 + 0.5));
  CHECK(m.RingMs(std::vector<int32_t>{1}) == 0);  // one member: nothing to reduce
}

TEST_CASE("the ring moves its payload at the links' rate times network.packet_efficiency") {
  const std::string t = "model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 0}";
  AllreduceModel ideal(Spec(t));
  AllreduceModel framed(Spec(t, "network: {packet_efficiency: 0.8}\n"));
  std::vector<int32_t> all{0, 1, 2};
  CHECK(framed.TransferMs(all) == Approx(ideal.TransferMs(all) / 0.8));
  // The latencies are not the links' rate: unchanged.
  CHECK(framed.LatencyMs(all) == Approx(ideal.LatencyMs(all)));
  CHECK(framed.RingMs(all) == Approx(ideal.RingMs(all) + ideal.TransferMs(all) * (1 / 0.8 - 1)));
}

TEST_CASE("links: false leaves the transfers out, step latency explicit") {
  AllreduceModel m(
      Spec("model: softmax, allreduce: {parameters: 3000, step_latency_ms: 0.25, links: false}"));
  std::vector<int32_t> all{0, 1, 2};
  CHECK(m.TransferMs(all) == 0);
  CHECK(m.LinkLatencyMs(1, 2) == 0.25);
  CHECK(m.LatencyMs(all) == Approx(2 * 0.25 + 0.25));  // 2 phases and the hello
}

TEST_CASE("bad allreduce and scheduler fields are rejected by name") {
  auto bad = ParseClusterSpec("training: {allreduce: {paramters: 5}}\nnodes: [{name: a}]\n", "x.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("paramters") != std::string::npos);
  auto neg = ParseClusterSpec("scheduler: {overhead_ms: -1}\nnodes: [{name: a}]\n", "x.yaml");
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.status().message().find("scheduler.overhead_ms") != std::string::npos);
  for (const char* text : {"scheduler: {handoff_ms: -0.5}\n", "scheduler: {handoff_ms: .nan}\n",
                           "network: {packet_efficiency: 0}\n", "network: {packet_efficiency: 1.2}\n",
                           "network: {record_overhead_bytes: -1}\n", "network: {mtu: 1500}\n",
                           "network: {burst_ms: -1}\n", "network: {burst_min_bytes: .nan}\n",
                           "network: {ack_bytes_per_byte: -0.1}\n", "network: {request_bytes: -1}\n",
                           "network: {report_bytes: .nan}\n", "network: {assignment_bytes: .inf}\n"}) {
    INFO(text);
    auto r = ParseClusterSpec(std::string(text) + "nodes: [{name: a}]\n", "x.yaml");
    REQUIRE_FALSE(r.ok());
    const std::string msg = r.status().message();
    CHECK(msg.find("x.yaml:1") != std::string::npos);
    CHECK((msg.find("handoff_ms") != std::string::npos || msg.find("network") != std::string::npos ||
           msg.find("mtu") != std::string::npos));
    // The bad key itself is named.
    const std::string t(text);
    const size_t open = t.find('{') + 1;
    CHECK(msg.find(t.substr(open, t.find(':', open) - open)) != std::string::npos);
  }
  auto ok = ParseClusterSpec(
      "scheduler: {handoff_ms: 0.7}\nnetwork: {packet_efficiency: 0.9, record_overhead_bytes: 10}\n"
      "nodes: [{name: a}]\n",
      "x.yaml");
  REQUIRE(ok.ok());
  CHECK(ok->scheduler.handoff_ms == 0.7);
  CHECK(ok->network.packet_efficiency == 0.9);
  CHECK(ok->network.record_overhead_bytes == 10);
  auto defaults = ParseClusterSpec("nodes: [{name: a}]\n", "x.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->scheduler.handoff_ms == DefaultHandoffMs());
  CHECK(defaults->network.packet_efficiency == Approx(1448.0 / 1514.0));
  CHECK(defaults->network.record_overhead_bytes == 62);
  // The small packets measured on the testbed (docs/cluster-spec.md).
  CHECK(defaults->network.ack_bytes_per_byte == Approx(0.017));
  CHECK(defaults->network.request_bytes == 130);
  CHECK(defaults->network.report_bytes == 400);
  CHECK(defaults->network.assignment_bytes == 300);
  auto set = ParseClusterSpec(
      "network: {ack_bytes_per_byte: 0.02, request_bytes: 1, report_bytes: 2, assignment_bytes: 3}\n"
      "nodes: [{name: a}]\n",
      "x.yaml");
  REQUIRE(set.ok());
  CHECK(set->network.ack_bytes_per_byte == 0.02);
  CHECK(set->network.request_bytes == 1);
  CHECK(set->network.report_bytes == 2);
  CHECK(set->network.assignment_bytes == 3);
  auto neg_bytes = ParseClusterSpec("network: {report_bytes: -5}\nnodes: [{name: a}]\n", "x.yaml");
  REQUIRE_FALSE(neg_bytes.ok());
  CHECK(neg_bytes.status().message().find("network.report_bytes") != std::string::npos);
}

// Each member's uplink carries its chunk and the ACKs of the chunk it
// receives; the model charges both on the chunk's path.
TEST_CASE("the ring's chunks carry their TCP ACKs (network.ack_bytes_per_byte)") {
  const std::string t = "model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 0}";
  AllreduceModel ideal(Spec(t));
  AllreduceModel acked(
      Spec(t, "network: {packet_efficiency: 1, record_overhead_bytes: 0, ack_bytes_per_byte: 0.05}\n"));
  std::vector<int32_t> all{0, 1, 2};
  CHECK(acked.ChunkBytes(3) == ideal.ChunkBytes(3));
  CHECK(acked.WireChunkBytes(3) == Approx(ideal.ChunkBytes(3) * 1.05));
  CHECK(ideal.WireChunkBytes(3) == ideal.ChunkBytes(3));
  CHECK(acked.WireStateBytes() == Approx(acked.StateBytes() * 1.05));
  // The ACKs are link bytes: at packet_efficiency 0.8 they take 0.8 of
  // their size at the payload rate.
  AllreduceModel framed(
      Spec(t, "network: {packet_efficiency: 0.8, record_overhead_bytes: 0, ack_bytes_per_byte: 0.05}\n"));
  CHECK(framed.WireChunkBytes(3) == Approx(ideal.ChunkBytes(3) * 1.04));
  CHECK(acked.TransferMs(all) == Approx(ideal.TransferMs(all) * 1.05));
  CHECK(acked.LatencyMs(all) == Approx(ideal.LatencyMs(all)));
  REQUIRE(ideal.TransferMs(all) > 1);
}

// Without plan-ahead (BSP, overlap: false) the ring and the overhead add to
// every iteration: reads are over before any member's ring starts.
TEST_CASE("loft-sim charges the ring and the scheduler overhead per iteration") {
  const std::string model =
      "overlap: false, model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 0}";
  SimResult plain = RunUniform(Spec("overlap: false, model: none"));
  SimResult ring = RunUniform(Spec(model));
  SimResult both = RunUniform(Spec(model, "scheduler: {overhead_ms: 2}\n"));
  AllreduceModel m(Spec(model));
  std::vector<int32_t> all{0, 1, 2};
  const double ring_ms = m.RingMs(all);
  REQUIRE(ring_ms > 10);
  CHECK(ring.summary.mean_iteration_ms == Approx(plain.summary.mean_iteration_ms + ring_ms).epsilon(1e-6));
  CHECK(both.summary.mean_iteration_ms == Approx(ring.summary.mean_iteration_ms + 2).epsilon(1e-6));
  // With ACKs on the links the simulated ring still takes RingMs exactly.
  const std::string acks =
      "network: {packet_efficiency: 1, record_overhead_bytes: 0, ack_bytes_per_byte: 0.05, request_bytes: 0, "
      "report_bytes: 0, assignment_bytes: 0}\n";
  SimResult plain_acked = RunUniform(Spec("overlap: false, model: none", acks));
  SimResult ring_acked = RunUniform(Spec(model, acks));
  const double acked_ring_ms = AllreduceModel(Spec(model, acks)).RingMs(all);
  CHECK(acked_ring_ms > ring_ms + 0.1);
  CHECK(ring_acked.summary.mean_iteration_ms ==
        Approx(plain_acked.summary.mean_iteration_ms + acked_ring_ms).epsilon(1e-6));
  // Every row carries the agent's view of the ring: at least the ring's time.
  for (const auto& it : ring.iterations)
    for (const auto& w : it.workers) {
      CHECK(w.allreduce_ms >= ring_ms - 1e-9);
      CHECK(w.own_ms <= it.makespan_ms + 1e-9);
    }
}

TEST_CASE("the reducer runs on each member's CPU: through its quota where it has one") {
  // The reducer's elements: (N−1)·⌈P/N⌉ = 2·1000 = 2000;
  // at 1000 ns each, 2 ms of CPU at one core.
  const std::string model =
      "overlap: false, model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 1000}";
  const std::string free_agent =
      "agent: {cpu_ms_per_partition: 0, cpu_ms_per_sample: 0, cpu_ms_per_request: 0, "
      "cpu_ms_per_fetched_sample: 0, cpu_ms_per_allreduce_mb: 0, idle_cores: 0}\n";
  ClusterSpec plain = Spec(model, free_agent);
  ClusterSpec quota = plain;
  quota.nodes[1].compute.cpu_cores = 0.1;  // its CFS period: 10 ms, so a 1 ms bucket
  REQUIRE(AllreduceModel(plain).TailMs(3) == Approx(2.0));
  const SimResult a = RunUniform(plain);
  const SimResult b = RunUniform(quota);
  // The first ring: b's bucket is full, 1/0.9 ms of the work at one core,
  // the rest at 0.1 cores: 1/0.9 + (2 − 1/0.9)/0.1 = 10 ms, 8 more than
  // at one core; the other members' reducers end earlier.
  CHECK(b.iterations[0].makespan_ms == Approx(a.iterations[0].makespan_ms + 8.0).epsilon(1e-9));
  for (size_t i = 1; i < b.iterations.size(); ++i)
    CHECK(b.iterations[i].makespan_ms > a.iterations[i].makespan_ms + 1.0);
  // A free reducer costs no quota.
  ClusterSpec free_reducer = quota;
  free_reducer.training.allreduce.reduce_ns_per_element = 0;
  ClusterSpec free_plain = plain;
  free_plain.training.allreduce.reduce_ns_per_element = 0;
  const SimResult c = RunUniform(free_reducer);
  const SimResult d = RunUniform(free_plain);
  for (size_t i = 0; i < c.iterations.size(); ++i)
    CHECK(c.iterations[i].makespan_ms == Approx(d.iterations[i].makespan_ms).epsilon(1e-12));
}

TEST_CASE("a ring step's exchange CPU runs through each quota member's CPU alongside its transfers") {
  // N = 3, P = 3000: a chunk is 1000 parameters, 4000 bytes; a step has
  // each member send and receive one, 0.008 MB, at 1000 ms per MB 8 ms of
  // CPU. Nothing else costs CPU (the reducer is free).
  const std::string model =
      "overlap: false, model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 0}";
  auto agent = [](double per_mb) {
    return "agent: {cpu_ms_per_partition: 0, cpu_ms_per_sample: 0, cpu_ms_per_request: 0, "
           "cpu_ms_per_fetched_sample: 0, cpu_ms_per_allreduce_mb: " +
           std::to_string(per_mb) + ", idle_cores: 0}\n";
  };
  const ClusterSpec plain = Spec(model, agent(1000));
  const ClusterSpec free_cpu = Spec(model, agent(0));
  ClusterSpec quota = plain;
  quota.nodes[1].compute.cpu_cores = 0.1;  // its CFS period: 10 ms, so a 1 ms bucket
  ClusterSpec quota_free = free_cpu;
  quota_free.nodes[1].compute.cpu_cores = 0.1;
  const SimResult a = RunUniform(plain);
  const SimResult z = RunUniform(free_cpu);
  const SimResult b = RunUniform(quota);
  const SimResult c = RunUniform(quota_free);
  REQUIRE(a.iterations.size() == b.iterations.size());
  // Without a quota the exchange's CPU is free; so it is at 0 ms per MB.
  for (size_t i = 0; i < a.iterations.size(); ++i) {
    CHECK(a.iterations[i].makespan_ms == Approx(z.iterations[i].makespan_ms).epsilon(1e-12));
    CHECK(c.iterations[i].makespan_ms == Approx(z.iterations[i].makespan_ms).epsilon(1e-12));
  }
  // The first ring on the 0.1-core member. Each phase's transfers take T
  // (the slowest member: 6.4 ms + 3 ms latency) while its CPU runs (2
  // payloads sent and 2 received, 0.016 MB, 16 ms), and the CPU takes
  // longer. The first phase's CPU starts with a full bucket: 1/0.9 ms at
  // one core, the rest at 0.1 cores, 150 ms. The second starts with an
  // empty bucket, 160 ms.
  const AllreduceModel m(plain);
  const std::vector<int32_t> all{0, 1, 2};
  const double steps_ms = m.RingMs(all) - m.HelloMs(all);
  REQUIRE(steps_ms / 2 == Approx(9.4));
  CHECK(b.iterations[0].makespan_ms ==
        Approx(a.iterations[0].makespan_ms - steps_ms + 150.0 + 160.0).epsilon(1e-9));
  for (size_t i = 1; i < b.iterations.size(); ++i)
    CHECK(b.iterations[i].makespan_ms > a.iterations[i].makespan_ms + 250.0);
  // A phase whose CPU fits inside its transfers costs nothing more: at 1 ms
  // per MB a phase is 0.016 ms of CPU, within the 1 ms bucket, under T.
  ClusterSpec light = Spec(model, agent(1));
  light.nodes[1].compute.cpu_cores = 0.1;
  const SimResult l = RunUniform(light);
  CHECK(l.iterations[0].makespan_ms == Approx(a.iterations[0].makespan_ms).epsilon(1e-9));
}

// With plan-ahead (overlap: true) the reads of t+1 run while t computes
// and all-reduces, and share the links with the ring's flows.
TEST_CASE("with plan-ahead the ring overlaps the next reads and shares their links") {
  auto run = [](const ClusterSpec& s, int plan_ahead) {
    SimOptions o;
    o.policy = "uniform";
    o.plan_ahead = plan_ahead;
    auto r = RunPolicy(s, o);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    return *r;
  };
  const std::string model = "model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 0}";
  const SimResult bsp = run(Spec(model), 0);
  const SimResult ahead = run(Spec(model), -1);  // auto: overlap is true by default
  CHECK(bsp.plan_ahead == 0);
  CHECK(ahead.plan_ahead >= 1);  // deeper than 1 for the default hand-off
  CHECK(ahead.planned_ahead >= 3);
  AllreduceModel m(Spec(model));
  std::vector<int32_t> all{0, 1, 2};
  const double ring_ms = m.RingMs(all);
  // Pipelined: faster than BSP, never faster than the ring itself.
  CHECK(ahead.summary.mean_iteration_ms < bsp.summary.mean_iteration_ms - 1.0);
  CHECK(ahead.summary.mean_iteration_ms >= ring_ms - 1e-9);
  // In BSP no read meets a ring flow: remote reads take their nominal
  // time. Pipelined, some read of t+1 shares an uplink with t's ring and
  // takes longer than the same read in BSP (same uniform plans).
  REQUIRE(bsp.iterations.size() == ahead.iterations.size());
  bool slower = false;
  for (size_t i = 1; i < bsp.iterations.size(); ++i) {
    for (const auto& w : ahead.iterations[i].workers)
      for (const auto& b : bsp.iterations[i].workers)
        if (w.node == b.node && w.remote == b.remote && w.remote_read_ms > b.remote_read_ms + 1e-6)
          slower = true;
  }
  CHECK(slower);
}

TEST_CASE("int8 exchange: loft-sim charges the ring's int8 chunk bytes (models::ChunkWireBytes)") {
  const ClusterSpec none = Spec("model: mlp, aggregation: mean");
  const ClusterSpec int8 = Spec("model: mlp, aggregation: mean, exchange: {compression: int8}");
  const AllreduceModel a(none), b(int8);
  for (size_t n : {2u, 3u, 6u}) {
    const auto elements =
        static_cast<size_t>((a.parameters() + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n));
    CHECK(a.ChunkBytes(n) ==
          static_cast<double>(models::ChunkWireBytes(models::Compression::kNone, elements)));
    CHECK(b.ChunkBytes(n) ==
          static_cast<double>(models::ChunkWireBytes(models::Compression::kInt8, elements)));
  }
  CHECK(RunUniform(int8).summary.mean_iteration_ms < RunUniform(none).summary.mean_iteration_ms);
}

TEST_CASE("exchange period: loft-sim runs the ring only after a round's last step") {
  // iterations 0..4, period 2: rounds end at 1, 3 and 4 (the job's last).
  const SimResult r = RunUniform(Spec("model: mlp, aggregation: mean, exchange: {period: 2}"));
  REQUIRE(r.iterations.size() == 5);
  for (const IterationRecord& it : r.iterations) {
    const bool exchanged = it.iteration == 1 || it.iteration == 3 || it.iteration == 4;
    for (const auto& w : it.workers) {
      INFO("iteration " << it.iteration << " worker " << w.node);
      CHECK((w.allreduce_ms > 0) == exchanged);
    }
  }
}

// training.byzantine_tolerance f > 0 (implied by a robust rule on 3 nodes):
// the verified ring's scatter carries r1 = min(f+1, N) chunks per link, its
// gather a chunk and r1−1 digests, the reducer reduces r1 chunks, and one
// more exchange (the dispute bitmaps) follows the steps; the simulated ring
// takes exactly that.
TEST_CASE("loft-sim charges the verified ring when training.byzantine_tolerance > 0") {
  const std::string base =
      "overlap: false, model: softmax, allreduce: {parameters: 3000, reduce_ns_per_element: 100}";
  const ClusterSpec plain_spec = Spec(base + ", aggregation: median, byzantine_tolerance: 0");
  const ClusterSpec verified_spec = Spec(base + ", aggregation: median");  // f = 1 implied
  REQUIRE(verified_spec.training.byzantine_tolerance == 1);
  AllreduceModel plain(plain_spec), verified(verified_spec);
  std::vector<int32_t> all{0, 1, 2};
  CHECK(plain.Primaries(3) == 1);
  CHECK(verified.Primaries(3) == 2);
  const double c = plain.ChunkBytes(3);             // 4·1000
  CHECK(verified.PhaseChunkBytes(3, 0) == 2 * c);   // scatter
  CHECK(verified.PhaseChunkBytes(3, 1) == c + 32);  // gather: the copy and one digest
  CHECK(plain.PhaseChunkBytes(3, 0) == c);
  CHECK(plain.PhaseChunkBytes(3, 1) == c);
  // Every phase's slowest member is b (10 Mbit/s): transfer ∝ bytes.
  CHECK(verified.TransferMs(all) == Approx(plain.TransferMs(all) * (2 * c + (c + 32)) / (2 * c)));
  CHECK(verified.TailMs(3) == Approx(2 * plain.TailMs(3)));
  CHECK(verified.VerifyMs(all) == Approx(verified.HelloMs(all)));
  CHECK(plain.VerifyMs(all) == 0);
  CHECK(verified.RingMs(all) > plain.RingMs(all) + verified.HelloMs(all));
  // The simulated iterations take the model's ring exactly (BSP, no overlap).
  const SimResult none = RunUniform(Spec("overlap: false, model: none"));
  const SimResult v = RunUniform(verified_spec);
  const SimResult p = RunUniform(plain_spec);
  CHECK(p.summary.mean_iteration_ms ==
        Approx(none.summary.mean_iteration_ms + plain.RingMs(all)).epsilon(1e-6));
  CHECK(v.summary.mean_iteration_ms ==
        Approx(none.summary.mean_iteration_ms + verified.RingMs(all)).epsilon(1e-6));
}

// training.exchange.overlap: while a round's exchange runs the scheduler
// plans the next round's first steps (ExchangePlan::ReadAhead) and the
// agents read them (core/read_ahead.h), so their reads leave the round.
// Every node holds every sample (replication 3): the reads are local and
// do not share the ring's links. The exchange (b's 2 Mbit/s uplink,
// ~1.3 s) is long against a step's local read at 1 MB/s: without exchange
// overlap two of the next round's reads fit in it (auto plan-ahead 2, the
// agent's ready slot and its reader), with it three.
TEST_CASE("exchange overlap: loft-sim reads the next round's first steps during the exchange") {
  auto run = [](const ClusterSpec& s) {
    SimOptions o;
    o.policy = "uniform";
    o.plan_ahead = -1;  // auto
    auto r = RunPolicy(s, o);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    return *r;
  };
  ClusterSpec serial = Spec("model: mlp, aggregation: mean, exchange: {period: 4, compression: int8}");
  ClusterSpec overlapped =
      Spec("model: mlp, aggregation: mean, exchange: {period: 4, compression: int8, overlap: true}");
  for (ClusterSpec* s : {&serial, &overlapped}) {
    s->training.iterations = 40;
    s->training.global_batch = 256;
    s->placement.replication = 3;
    s->nodes[1].link.up_mbps = 2;
    for (NodeSpec& n : s->nodes) n.disk.read_mbps = 1;
  }
  REQUIRE(ReadyDepth(serial.training) == 1);
  REQUIRE(ReadyDepth(overlapped.training) == kExchangeReadAhead);
  const SimResult a = run(serial);
  const SimResult b = run(overlapped);
  REQUIRE(a.iterations.size() == 40);
  REQUIRE(b.iterations.size() == 40);
  // Rounds end at 3, 7, ...: the first two steps after one are read during
  // the exchange either way; the third only with exchange overlap.
  for (size_t round_end = 3; round_end + 3 < 40; round_end += 4) {
    INFO("round ending at " << round_end);
    CHECK(a.iterations[round_end + 3].makespan_ms > 4 * b.iterations[round_end + 3].makespan_ms / 3);
    CHECK(a.iterations[round_end + 1].makespan_ms < 5.0);
    CHECK(b.iterations[round_end + 1].makespan_ms < 5.0);
  }
  CHECK(b.summary.mean_iteration_ms < a.summary.mean_iteration_ms * 0.95);
}

// Beyond kMaxPairwiseMembers the simulator runs one flow per member (its
// N − 1 payloads to the next) instead of N(N−1): the same bytes on every
// link, so the same exchange time without contention.
TEST_CASE("a large exchange runs as one flow per member and still takes RingMs") {
  std::string nodes = "nodes:\n";
  const int n = static_cast<int>(AllreduceModel::kMaxPairwiseMembers) + 8;
  nodes += "  - name: e\n    count: " + std::to_string(n) +
           "\n    compute: {fixed_ms: 1, per_sample_ms: 0.01}\n"
           "    link: {up_mbps: 50, down_mbps: 100, latency_ms: 2}\n";
  const std::string net =
      "network: {packet_efficiency: 1, record_overhead_bytes: 0, burst_ms: 0, burst_min_bytes: 0, "
      "ack_bytes_per_byte: 0, request_bytes: 0, report_bytes: 0, assignment_bytes: 0}\n";
  auto spec = [&](const std::string& model) {
    auto s = ParseClusterSpec(
        "dataset: {name: d, samples: 20000, sample_bytes: 784}\n"
        "training: {global_batch: 400, min_batch: 1, iterations: 3, seed: 3, overlap: false, " +
            model + "}\n" + net + nodes,
        "big.yaml");
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    return *s;
  };
  const ClusterSpec none = spec("model: none");
  const ClusterSpec ring = spec("model: softmax, aggregation: mean, allreduce: {reduce_ns_per_element: 0}");
  const SimResult a = RunUniform(none);
  const SimResult b = RunUniform(ring);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  const double ring_ms = AllreduceModel(ring).RingMs(all);
  REQUIRE(ring_ms > 1);
  CHECK(b.summary.mean_iteration_ms == Approx(a.summary.mean_iteration_ms + ring_ms).epsilon(1e-6));
}
