// Simulator, the agent side: each worker's reader and compute stages
// (edge_agent/zmq_agent_server.cc ReaderLoop / ComputeLoop, prefetch
// depth 1) and the ring all-reduce on the flow network. simulator.h
// describes the model.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sim/simulator.h"

namespace loft::sim {

void Simulator::Deliver(Part& p) {
  if (crashed_[static_cast<size_t>(p.node)]) return;  // lost: its death will fail it
  Background(SchedulerNode(), p.node, spec_.network.assignment_bytes);
  agents_[static_cast<size_t>(p.node)].assigned.push_back(p.id);
  ReaderNext(p.node);
}

// The reader takes the next assigned partition when it holds none; with
// training.overlap false only when the compute stage is idle too (nothing
// ready, nothing computing or in its ring), so a node's reads never
// overlap its compute.
void Simulator::ReaderNext(int32_t node) {
  if (crashed_[static_cast<size_t>(node)]) return;
  Agent& ag = agents_[static_cast<size_t>(node)];
  if (!spec_.training.overlap && (!ag.ready.empty() || ag.computing != kNone)) return;
  while (ag.reading == kNone && !ag.assigned.empty()) {
    const uint64_t id = ag.assigned.front();
    ag.assigned.erase(ag.assigned.begin());
    Part* p = FindPart(id);
    if (p == nullptr) continue;  // failed before its read started
    ag.reading = id;
    StartRead(*p);
  }
}

// Local read l·s/disk concurrently with the remote read: per serving
// peer, the reader's latency then one flow through the network.
void Simulator::StartRead(Part& p) {
  p.read_start_ms = queue_.now_ms();
  const uint64_t id = p.id;
  const int32_t node = p.node;
  // The agent's own CPU for the partition (free on a node without a quota).
  const double cpu_end = cpu_[static_cast<size_t>(node)].Run(
      queue_.now_ms(), agent_cpu_.cpu_ms_per_partition +
                           agent_cpu_.cpu_ms_per_sample * static_cast<double>(p.local + p.remote) +
                           agent_cpu_.cpu_ms_per_fetched_sample * static_cast<double>(p.remote));
  if (cpu_end > queue_.now_ms()) {
    p.cpu_done = false;
    queue_.After(cpu_end - queue_.now_ms(), [this, id] {
      Part* x = FindPart(id);
      if (x == nullptr || crashed_[static_cast<size_t>(x->node)]) return;
      x->cpu_done = true;
      if (x->read_in()) ReadDone(*x);
    });
  }
  if (p.local > 0) {
    p.local_done = false;
    queue_.After(model_.LocalReadMs(node, p.local), [this, id] {
      Part* x = FindPart(id);
      if (x == nullptr || crashed_[static_cast<size_t>(x->node)]) return;
      x->local_done = true;
      x->local_end_ms = queue_.now_ms();
      if (x->read_in()) ReadDone(*x);
    });
  }
  if (p.remote > 0) {
    p.remote_done = false;
    p.flows_pending = static_cast<int>(p.from_peer.size());
    // The reader's latency, then the request's own cost (network.request_overhead_ms).
    const double latency = model_.LatencyMs(node) + model_.RequestOverheadMs();
    for (const auto& [peer, count] : p.from_peer) {
      const int32_t server = peer;
      // Decoded for this worker (Partition.decoded_from): ρ times the bytes,
      // and the holder's decode before it replies.
      const bool decoded = std::binary_search(p.decoded_from.begin(), p.decoded_from.end(), server);
      const double bytes = decoded ? model_.DecodedFetchBytes(count) : model_.FetchBytes(count);
      const double decode_ms =
          decoded ? decode_ms_per_sample_[static_cast<size_t>(server)] * static_cast<double>(count) : 0.0;
      Background(node, server, spec_.network.request_bytes);
      // The server's CPU for the request (a quota node): its reply starts after it.
      const double serve_cpu =
          agent_cpu_.cpu_ms_per_request + agent_cpu_.cpu_ms_per_sample * static_cast<double>(count);
      queue_.After(latency, [this, id, server, node, bytes, serve_cpu, decode_ms] {
        ServeRequest(id, server, node, bytes, serve_cpu, decode_ms);
      });
    }
  }
  if (p.read_in()) ReadDone(p);
}

void Simulator::SendGrants(uint64_t id) {
  const sched::PartitionRecord* rec = driver_->state().ledger().Find(id);
  if (rec == nullptr) return;
  sched::SendServeGrants(rec->partition, [this, id](int32_t peer, loft::v1::ServeGrant&& g) {
    ++result_.serve_grants;
    if (options_.record_inputs)
      result_.grants.push_back({peer, g.partition_id(), g.requester(), g.sample_ids_size()});
    // Lost if the peer crashes before it arrives (a new process has none).
    auto arrive = [this, peer, id, reg = registrations_[static_cast<size_t>(peer)]] {
      if (!crashed_[static_cast<size_t>(peer)] && registrations_[static_cast<size_t>(peer)] == reg)
        granted_[static_cast<size_t>(peer)].insert(id);
    };
    // The control path of the assignment (scheduler.handoff_ms), sent
    // just before it: it arrives first.
    if (const double handoff = spec_.scheduler.handoff_ms; handoff > 0)
      queue_.After(handoff, arrive);
    else
      arrive();
  });
}

void Simulator::ServeRequest(uint64_t id, int32_t server, int32_t node, double bytes, double serve_cpu,
                             double decode_ms) {
  if (FetchStalled(id, server, node)) return;
  if (granted_[static_cast<size_t>(server)].count(id) == 0) {
    // "no grant yet" (edge_agent/agent_service.cc): the refusal's way back,
    // the reader's retry backoff (peer_fetcher.h, 1 ms), the request again.
    constexpr double kRetryBackoffMs = 1.0;
    const double again = 2 * model_.LatencyMs(node) + model_.RequestOverheadMs() + kRetryBackoffMs;
    queue_.After(again, [this, id, server, node, bytes, serve_cpu, decode_ms] {
      ServeRequest(id, server, node, bytes, serve_cpu, decode_ms);
    });
    return;
  }
  CpuQuota& cpu = cpu_[static_cast<size_t>(server)];
  const double now = queue_.now_ms();
  // A decoded serve: the holder preprocesses the samples first, on its CPU
  // quota when it has one (the same law as its own decode, ReadDone).
  double served = cpu.Run(now, serve_cpu);
  if (decode_ms > 0) served = cpu.enabled() ? cpu.Run(served, decode_ms) : std::max(served, now) + decode_ms;
  if (served <= queue_.now_ms()) return StartFetchFlow(id, server, node, bytes);
  queue_.After(served - queue_.now_ms(),
               [this, id, server, node, bytes] { StartFetchFlow(id, server, node, bytes); });
}

bool Simulator::FetchStalled(uint64_t id, int32_t server, int32_t node) {
  return FindPart(id) == nullptr || crashed_[static_cast<size_t>(server)] ||
         crashed_[static_cast<size_t>(node)];
}

// One serving peer's reply to a partition's remote read, as a flow.
void Simulator::StartFetchFlow(uint64_t id, int32_t server, int32_t node, double bytes) {
  if (FetchStalled(id, server, node)) return;
  const uint64_t f = network_.Start(server, node, bytes, [this, id, server](bool ok) {
    Part* x = FindPart(id);
    if (x == nullptr) return;
    if (!ok && (crashed_[static_cast<size_t>(server)] || crashed_[static_cast<size_t>(x->node)]))
      return;  // stalled until the death is noticed (then the partition fails)
    if (!ok) {
      // Flows are cut only when a node dies, and the liveness rule
      // already failed every partition reading from it.
      return Fail(
          Internal(fmt::format("partition {}: a read from node {} was cut but the partition "
                               "did not fail",
                               id, server)));
    }
    x->by_peer_ms[server] = queue_.now_ms() - x->read_start_ms;
    if (--x->flows_pending == 0) {
      x->remote_done = true;
      x->remote_end_ms = queue_.now_ms();
      if (x->read_in()) ReadDone(*x);
    }
  });
  FindPart(id)->flows.push_back(f);
  // The reader's ACKs of the reply, on its uplink and the server's downlink.
  Background(node, server, bytes * spec_.network.ack_bytes_per_byte);
}

void Simulator::Background(int32_t from, int32_t to, double bytes) {
  auto crashed = [this](int32_t n) { return n != SchedulerNode() && crashed_[static_cast<size_t>(n)]; };
  if (bytes <= 0 || crashed(from) || crashed(to)) return;
  // Link bytes, on links whose capacity is in payload bytes (ClusterModel).
  network_.Start(from, to, bytes * spec_.network.packet_efficiency, [](bool) {});
}

// The read is in: into the ready queue, or held until it has room.
void Simulator::ReadDone(Part& p) {
  if (crashed_[static_cast<size_t>(p.node)]) return;
  if (!p.decoded && !decode_ms_per_sample_.empty()) {
    // Encoded samples: the reader thread decodes them after the reads
    // (preprocess/), on the node's CPU quota when it has one.
    p.decoded = true;
    // The samples its holders decoded (remote_decoded) arrive as the input.
    const double work = decode_ms_per_sample_[static_cast<size_t>(p.node)] *
                        static_cast<double>(p.local + p.remote - p.remote_decoded);
    CpuQuota& cpu = cpu_[static_cast<size_t>(p.node)];
    const double now = queue_.now_ms();
    const double end = cpu.enabled() ? cpu.Run(now, work) : now + work;
    p.decode_ms = end - now;
    if (end > now) {
      const uint64_t id = p.id;
      queue_.After(end - now, [this, id] {
        Part* x = FindPart(id);
        if (x != nullptr && !crashed_[static_cast<size_t>(x->node)]) ReadDone(*x);
      });
      return;
    }
  }
  Agent& ag = agents_[static_cast<size_t>(p.node)];
  p.flows.clear();
  p.read_during_exchange = ag.exchange_since_ms >= 0 || ag.exchange_end_ms > p.read_start_ms;
  if (static_cast<int>(ag.ready.size()) >= ready_depth_) {
    ag.holding = true;
    return;
  }
  ag.ready.push_back(p.id);
  ag.reading = kNone;
  const int32_t node = p.node;
  ReaderNext(node);
  ComputeNext(node);
}

// The compute stage takes the ready partition when it is free (its last
// partition computed and, with a model, all-reduced).
void Simulator::ComputeNext(int32_t node) {
  if (done_ || crashed_[static_cast<size_t>(node)]) return;
  Agent& ag = agents_[static_cast<size_t>(node)];
  if (ag.computing != kNone || ag.ready.empty()) return;
  const uint64_t id = ag.ready.front();
  ag.computing = id;
  ag.ready.pop_front();
  if (ag.holding) {
    ag.ready.push_back(ag.reading);
    ag.reading = kNone;
    ag.holding = false;
    ReaderNext(node);
  }
  Part* p = FindPart(id);
  if (p == nullptr) {
    ag.computing = kNone;
    return ComputeNext(node);
  }
  p->compute_start_ms = queue_.now_ms();
  if (!p->local_step) ag.exchange_since_ms = p->compute_start_ms;
  p->compute_ms = model_.ComputeMs(node, p->batch, p->compute_start_ms, p->iteration);
  queue_.After(p->compute_ms, [this, id] {
    Part* x = FindPart(id);
    if (x != nullptr && !crashed_[static_cast<size_t>(x->node)]) Computed(*x);
  });
}

void Simulator::Computed(Part& p) {
  p.compute_end_ms = queue_.now_ms();
  // Its iteration closed (every partition of it timed out): no ring is
  // left to join; the late ack only returns the credit.
  if (open_.Find(p.iteration) == nullptr) return Acked(p);
  // A local step of a longer round (training.exchange) has no ring.
  if (!allreduce_.enabled() || p.batch == 0 || p.local_step) return Acked(p);
  MaybeStartRing(p.iteration);
}

// The ring of `iteration` starts when every node with an open non-empty
// partition of it has computed one; its members are those nodes.
void Simulator::MaybeStartRing(int64_t iteration) {
  if (done_ || !allreduce_.enabled()) return;
  const sched::OpenIteration* oi = open_.Find(iteration);
  if (oi == nullptr) return;
  Ring& ring = rings_[iteration];
  if (ring.running) return;
  std::vector<int32_t> need, have;
  std::vector<uint64_t> waiting;
  for (uint64_t id : oi->partitions) {
    const Part* x = FindPart(id);
    if (x == nullptr || x->batch == 0 || x->local_step) continue;
    need.push_back(x->node);
    if (x->compute_end_ms >= 0 && agents_[static_cast<size_t>(x->node)].computing == id) {
      have.push_back(x->node);
      waiting.push_back(id);
    }
  }
  if (waiting.empty()) return;
  if (ring.done) {
    // A late partition of an iteration whose ring already ran (a second
    // partition of a node): nothing left to join.
    for (uint64_t id : waiting) {
      if (Part* x = FindPart(id)) Acked(*x);
    }
    return;
  }
  std::sort(need.begin(), need.end());
  need.erase(std::unique(need.begin(), need.end()), need.end());
  std::sort(have.begin(), have.end());
  have.erase(std::unique(have.begin(), have.end()), have.end());
  if (have != need) return;
  ring.running = true;
  ring.members = std::move(have);
  ring.parts = std::move(waiting);
  ring.step = -2;  // the hello first
  ring.start_ms = queue_.now_ms();
  RingStep(iteration, ring.generation);
}

// The hello exchange, then the two phases (scatter, gather): every
// member sends its pair payload to every other over the flow network,
// each flow after its link's latency, while quota members run the
// phase's CPU; a phase ends with its last flow or CPU. Then the reducer.
void Simulator::RingStep(int64_t iteration, uint64_t generation) {
  Ring* live = RunningRing(iteration, generation);
  if (live == nullptr) return;
  Ring& ring = *live;
  if (RingStalled(ring)) return;  // restarted when the death is noticed
  const size_t n = ring.members.size();
  const int steps = n <= 1 ? 0 : AllreduceModel::kPhases;
  // Verified chunks: the dispute-bitmap exchange after the phases
  // (AllreduceModel::VerifyMs), as one more step.
  const double verify_ms = n <= 1 ? 0.0 : allreduce_.VerifyMs(ring.members);
  auto next = [this, iteration, generation] {
    Ring* r = RunningRing(iteration, generation);
    if (r == nullptr) return;
    ++r->step;
    RingStep(iteration, generation);
  };
  if (ring.step == -2) {  // the hello exchange
    queue_.After(allreduce_.HelloMs(ring.members), next);
    return;
  }
  if (ring.step == -1) return RingState(iteration, generation);
  if (ring.step == steps && verify_ms > 0) {
    queue_.After(verify_ms, next);
    return;
  }
  if (ring.step >= steps) {
    // The aggregate is fixed: every partition the ring applied, named
    // with its worker, is what each member's ack names (the ring's votes,
    // sched::RingCommitter). The reducer's work (TailMs, CPU at one core)
    // runs on each member's CPU: on a node with a quota through it, behind
    // the agent's own work queued there (the next partition's reads, what
    // it serves), else at one core. Each member acks when its own is done
    // (members done at the same time together, in one event; without a
    // tail, all of them at once, now).
    ring.applying = true;
    ring.applied.clear();
    for (uint64_t id : ring.parts) {
      if (const Part* x = FindPart(id); x != nullptr) ring.applied.emplace_back(id, x->node);
    }
    const double tail = std::max(0.0, allreduce_.TailMs(n));
    const double now = queue_.now_ms();
    // The evaluation (SimOptions::eval_every) follows on the first member,
    // before its ack, as the agent's Compute does; its time is that
    // partition's compute, not its ring (MembersApplied).
    ring.eval_member = EvaluatesAfter(iteration) ? ring.members.front() : -1;
    ring.eval_ms = ring.eval_member >= 0 ? EvalMs(ring.eval_member) : 0.0;
    last_ring_iteration_ = std::max(last_ring_iteration_, iteration);
    std::map<double, std::vector<std::pair<int32_t, int64_t>>> by_end;
    for (int32_t m : ring.members) {
      CpuQuota& cpu = cpu_[static_cast<size_t>(m)];
      const double end = tail > 0 && cpu.enabled() ? cpu.Run(now, tail) : now + tail;
      by_end[end + (m == ring.eval_member ? ring.eval_ms : 0.0)].emplace_back(
          m, registrations_[static_cast<size_t>(m)]);
    }
    ring.applying_pending = static_cast<int>(by_end.size());
    for (auto& [end, members] : by_end) {
      if (end <= now) {
        MembersApplied(iteration, generation, std::move(members));
        continue;
      }
      queue_.After(end - now, [this, iteration, generation, members = std::move(members)] {
        MembersApplied(iteration, generation, members);
      });
    }
    return;
  }
  // The step's CPU on the quota members runs alongside its transfers,
  // behind what each agent queued before (the next partition's reads, what
  // it serves): the step ends when both are done.
  const double now = queue_.now_ms();
  const double cpu_end = RingStepCpuEnd(ring.members, ring.step);
  if (!allreduce_.links()) {
    double lat = 0;
    for (int32_t m : ring.members) lat = std::max(lat, allreduce_.MemberLatencyMs(ring.members, m));
    queue_.After(std::max(lat, cpu_end - now), next);
    return;
  }
  // Up to kMaxPairwiseMembers members: one flow per ordered pair, as the
  // agents connect (each a fair share of a shared link). Beyond, N(N−1)
  // flows would swamp the flow network: one flow per member to the next
  // carrying its N − 1 payloads loads every uplink and downlink with the
  // same bytes (AllreduceModel's per-member transfer is unchanged).
  const bool pairwise = n <= AllreduceModel::kMaxPairwiseMembers;
  ring.flows_pending = static_cast<int>(pairwise ? n * (n - 1) : n) + (cpu_end > now ? 1 : 0);
  ring.flows.clear();
  if (cpu_end > now) {
    queue_.After(cpu_end - now,
                 [this, iteration, generation, next] { RingPartDone(iteration, generation, next); });
  }
  const double bytes = allreduce_.PhaseWireBytes(n, ring.step);
  if (pairwise) {
    for (int32_t from : ring.members)
      for (int32_t to : ring.members)
        if (from != to) RingFlow(iteration, generation, from, to, bytes, next);
  } else {
    for (size_t i = 0; i < n; ++i)
      RingFlow(iteration, generation, ring.members[i], ring.members[(i + 1) % n],
               bytes * static_cast<double>(n - 1), next);
  }
}

bool Simulator::EvaluatesAfter(int64_t iteration) const {
  if (options_.eval_every <= 0 || spec_.training.model == "none") return false;
  if (iteration == target_iterations_ - 1) return true;
  const int64_t e = options_.eval_every;
  const auto& ex = spec_.training.exchange;
  // A delta exchange: the first exchange at or after each multiple of e.
  if (ex.period_auto || ex.period > 1) return (iteration + 1) / e > (last_ring_iteration_ + 1) / e;
  return (iteration + 1) % e == 0;
}

double Simulator::EvalMs(int32_t member) const {
  const double n = static_cast<double>(spec_.training.eval.test_samples);
  const double now = queue_.now_ms();
  const double per_sample = model_.NominalComputeMs(member, 1, now) -
                            model_.NominalComputeMs(member, 0, now);  // slowdowns included
  return n * spec_.training.eval.relative_cost * per_sample;
}

double Simulator::RingStepCpuEnd(const std::vector<int32_t>& members, int phase) {
  const double now = queue_.now_ms();
  const double payloads = 2.0 * static_cast<double>(members.size() - 1);  // sent and received
  const double work =
      agent_cpu_.cpu_ms_per_allreduce_mb * payloads * allreduce_.PhaseChunkBytes(members.size(), phase) / 1e6;
  double end = now;
  if (!(work > 0)) return end;
  for (int32_t m : members) end = std::max(end, cpu_[static_cast<size_t>(m)].Run(now, work));
  return end;
}

// The state check after the hello (edge_agent/model_trainer.h step 2):
// each restarted member fetches the job's state (StateBytes) from the
// first member holding it, after that link's latency, as one flow on the
// network, then recomputes its gradient; the ring's steps follow.
void Simulator::RingState(int64_t iteration, uint64_t generation) {
  Ring& ring = rings_.find(iteration)->second;
  std::vector<int32_t> stale;
  int32_t source = -1;
  for (int32_t m : ring.members) {
    if (stale_[static_cast<size_t>(m)])
      stale.push_back(m);
    else if (source < 0)
      source = m;
  }
  auto next = [this, iteration, generation] {
    Ring* r = RunningRing(iteration, generation);
    if (r == nullptr || RingStalled(*r)) return;
    ++r->step;
    RingStep(iteration, generation);
  };
  if (stale.empty() || source < 0) return next();
  // Then the restarted members' second compute (the slowest one).
  auto recompute = [this, iteration, generation, next] {
    const Ring* r = RunningRing(iteration, generation);
    if (r == nullptr) return;
    double ms = 0;
    for (uint64_t id : r->parts) {
      const Part* x = FindPart(id);
      if (x != nullptr && stale_[static_cast<size_t>(x->node)])
        ms = std::max(ms, model_.ComputeMs(x->node, x->batch, queue_.now_ms(), x->iteration));
    }
    queue_.After(ms, next);
  };
  ring.flows_pending = static_cast<int>(stale.size());
  ring.flows.clear();
  for (int32_t to : stale)
    RingFlow(iteration, generation, source, to, allreduce_.WireStateBytes(), recompute);
}

void Simulator::RingFlow(int64_t iteration, uint64_t generation, int32_t from, int32_t to, double bytes,
                         std::function<void()> then) {
  queue_.After(allreduce_.LinkLatencyMs(from, to), [this, iteration, generation, from, to, bytes, then] {
    Ring* ring = RunningRing(iteration, generation);
    if (ring == nullptr) return;
    if (crashed_[static_cast<size_t>(from)] || crashed_[static_cast<size_t>(to)]) return;  // stalls
    auto arrived = [this, iteration, generation, then](bool ok) {
      if (ok) RingPartDone(iteration, generation, then);
    };
    if (!allreduce_.links()) return arrived(true);
    // Fluid (no burst): `loftctl calibrate` fits the ring's constants
    // against fluid transfers (sim/allreduce_model.h), so what bursts the
    // real ring got is already in its fitted per-element cost.
    const uint64_t f = network_.Start(from, to, bytes, arrived, /*burst=*/false);
    // `arrived` may have restarted or erased the ring: look it up again.
    if (Ring* r = RingOfGeneration(iteration, generation); r != nullptr) r->flows.push_back(f);
  });
}

void Simulator::RingPartDone(int64_t iteration, uint64_t generation, const std::function<void()>& then) {
  Ring* r = RingOfGeneration(iteration, generation);
  if (r == nullptr || --r->flows_pending != 0) return;
  r->flows.clear();
  then();
}

Simulator::Ring* Simulator::RingOfGeneration(int64_t iteration, uint64_t generation) {
  auto r = rings_.find(iteration);
  return r == rings_.end() || r->second.generation != generation ? nullptr : &r->second;
}

Simulator::Ring* Simulator::RunningRing(int64_t iteration, uint64_t generation) {
  Ring* ring = RingOfGeneration(iteration, generation);
  return ring != nullptr && ring->running ? ring : nullptr;
}

bool Simulator::RingStalled(const Ring& ring) const {
  return std::any_of(ring.members.begin(), ring.members.end(),
                     [this](int32_t m) { return crashed_[static_cast<size_t>(m)]; });
}

void Simulator::MembersApplied(int64_t iteration, uint64_t generation,
                               std::vector<std::pair<int32_t, int64_t>> group) {
  Ring* live = RunningRing(iteration, generation);
  if (live == nullptr) return;
  Ring& ring = *live;
  const double now = queue_.now_ms();
  // The members still the processes that started applying (a crashed one's
  // ack is lost with it; a restarted one holds the seed's parameters).
  std::vector<int32_t> members;
  for (const auto& [m, registration] : group) {
    if (crashed_[static_cast<size_t>(m)] || registrations_[static_cast<size_t>(m)] != registration) continue;
    members.push_back(m);
    stale_[static_cast<size_t>(m)] = false;  // synced by this ring
  }
  if (iteration < options_.trace_iterations && ring.members.size() > 1) {
    for (int32_t m : members)
      result_.spans.push_back({m, "all-reduce", ring.start_ms, now - ring.start_ms, iteration});
  }
  const bool last = --ring.applying_pending == 0;
  if (last) {
    ring.running = false;
    ring.done = true;
  }
  // Acks may close the iteration (and erase the ring): copies.
  const std::vector<uint64_t> parts = ring.parts;
  const std::vector<std::pair<uint64_t, int32_t>> applied = ring.applied;  // taken when it began applying
  const int32_t eval_member = ring.eval_member;
  const double eval_ms = ring.eval_ms;
  for (uint64_t id : parts) {
    Part* x = FindPart(id);
    if (x == nullptr || std::find(members.begin(), members.end(), x->node) == members.end()) continue;
    const double eval = x->node == eval_member ? eval_ms : 0.0;
    x->allreduce_ms = now - eval - x->compute_end_ms;
    x->compute_ms += eval;
    x->applied = applied;
    Acked(*x);
    if (done_) return;
  }
  // A ring that outlived its iteration (its partitions timed out) goes now.
  if (last && open_.Find(iteration) == nullptr) rings_.erase(iteration);
}

void Simulator::DropPart(Part& p) {
  const uint64_t id = p.id;
  for (uint64_t f : p.flows) network_.Cancel(f);
  p.flows.clear();
  Agent& ag = agents_[static_cast<size_t>(p.node)];
  // Queue and assigned entries are skipped when reached (as the daemon's
  // send queue skips a partition that is no longer planned).
  if (ag.reading == id) {
    ag.reading = kNone;
    ag.holding = false;
  }
  if (auto it = std::find(ag.ready.begin(), ag.ready.end(), id); it != ag.ready.end()) {
    ag.ready.erase(it);
    if (ag.holding) {
      ag.ready.push_back(ag.reading);
      ag.reading = kNone;
      ag.holding = false;
    }
  }
  if (ag.computing == id) ag.EndCompute(queue_.now_ms());
}

}  // namespace loft::sim
