// Writes the seed corpora of the stateful and state-restoring fuzz targets
// (scheduler, agent, ring, adopt_state, state_restore, loaders) into
// DIR/<name>/: programs in each target's operation format (the byte
// sequences below mirror what each target reads, fuzz_input.h), and
// encoded states, checkpoints, snapshots and journal entries made by the
// real code. Built with the tests (not run by ctest):
//   build/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
// A change to a target's operation format needs its seeds rewritten so.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/manifest.h"
#include "core/cluster_spec.h"
#include "core/codec.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/ring_hello.h"
#include "fuzz_input.h"
#include "fuzz_specs.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/sgd.h"
#include "models/state_hash.h"
#include "scheduler/driver.h"
#include "scheduler/journal.h"
#include "scheduler/plan.h"
#include "scheduler/run_recorder.h"
#include "server/options.h"
#include "server/sessions_file.h"

namespace {

namespace fs = std::filesystem;
using loft::fuzz::Fail;
using loft::fuzz::FuzzProgram;

fs::path g_root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Fail("cannot write " + (dir / name).string());
}

// ------------------------------------------------------------ scheduler
// Ops of fuzz_scheduler.cc: 0 register, 1 heartbeat, 2 credit, 3 done,
// 4 failed, 5 peer report, 6 status, 7 raw, 8 tick, 9 restart. Each
// message op ends with a sender byte (2 = insecure) and a time step (0).
struct SchedulerSeed {
  FuzzProgram p;
  bool training = false;
  SchedulerSeed(uint8_t a, uint8_t b) : training((a & 2) != 0) { p.U8(a).U8(b); }
  void End() { p.U8(2).U8(0); }
  void Register(uint8_t node) {
    p.U8(0).U8(node).U8(1 /*2 credits*/).U8(1 /*incarnation*/).U8(0 /*endpoint*/);
    if (training)
      p.U8(1 /*ring endpoint kind*/);
    else
      p.U8(0 /*no ring endpoint*/);
    p.U8(10 /*cached*/).U8(1 /*no root*/);
    End();
  }
  void Beat(uint8_t node) {
    p.U8(1).U8(node).U8(3).U8(0 /*credits 0*/).U8(2);
    End();
  }
  void Credit(uint8_t node) {
    p.U8(2).U8(node).U8(0 /*1 credit*/);
    End();
  }
  // Ack of the assignment `back` from the newest.
  void Done(uint8_t back) {
    p.U8(3).U8(back).U8(0 /*same attempt*/).U8(1 /*its worker*/);
    p.U8(1).U8(1).U8(1).U8(4).U8(0).U16(30).U8(0 /*no per-peer*/);
    if (training) {
      p.U8(1).U8(1 /*loss*/).U8(9 /*hash*/).U8(2 /*members*/).U8(1 /*applied*/).U8(0).U8(1).U8(1).U8(1);
    } else {
      p.U8(0);
    }
    End();
  }
  void Failed(uint8_t back) {
    p.U8(4).U8(back).U8(0).U8(1).Bytes("read failed").U8(1 /*one bad sample*/).U8(1).U8(0).U8(1);
    End();
  }
  void PeerReport(uint8_t node, uint8_t accused) {
    p.U8(5).U8(node).U8(accused).U8(1).U8(3);
    End();
  }
  void Status() {
    p.U8(6).U8(1);
    End();
  }
  void Tick(uint8_t step) { p.U8(8).U8(step); }
  void Restart() { p.U8(9).U8(1); }
};

void SchedulerSeeds() {
  {  // Two nodes, loft policy, a few iterations acked with credits.
    SchedulerSeed s(0x00, 0x00);
    s.Register(0);
    s.Register(1);
    s.Tick(1);
    for (int it = 0; it < 6; ++it) {
      for (uint8_t back = 4; back-- > 0;) s.Done(back);  // acks of acked ones are ignored
      s.Credit(0);
      s.Credit(1);
      s.Tick(1);
    }
    s.Status();
    Write("scheduler", "acks", s.p.bytes());
  }
  for (const uint8_t snapshots :
       {0x00, 0x40}) {  // restarts between iterations: replay only / snapshots every 3
    SchedulerSeed s(snapshots, 0x01);
    s.Register(0);
    s.Register(1);
    s.Tick(1);
    for (int it = 0; it < 4; ++it) {
      for (uint8_t back = 4; back-- > 0;) s.Done(back);  // acks of acked ones are ignored
      s.Credit(0);
      s.Credit(1);
      s.Tick(1);
      s.Restart();
      s.Beat(0);
      s.Beat(1);
    }
    Write("scheduler", snapshots ? "restarts_snapshots" : "restarts_replay", s.p.bytes());
  }
  {  // Training (softmax, trimmed mean, f = 1) on three nodes: failures,
     // reports, a silent node and its partitions' timeouts.
    SchedulerSeed s(0x03, 0x02);
    s.Register(0);
    s.Register(1);
    s.Register(2);
    s.Tick(1);
    s.Done(0);
    s.Failed(1);
    s.PeerReport(0, 2);
    s.PeerReport(1, 2);
    s.Credit(0);
    s.Credit(1);
    s.Tick(2);
    s.Beat(0);
    s.Beat(1);
    s.Tick(5);
    s.Tick(6);
    s.Status();
    Write("scheduler", "training_failures", s.p.bytes());
  }
  {  // Uniform policy, strict BSP, min_workers 1, re-registration.
    SchedulerSeed s(0x14, 0x08);
    s.Register(0);
    s.Tick(1);
    s.Done(0);
    s.Register(1);
    s.Register(0);
    s.Tick(3);
    s.Done(0);
    s.Done(1);
    s.Credit(0);
    s.Tick(1);
    Write("scheduler", "reregister", s.p.bytes());
  }
}

// ------------------------------------------------------------ agent
// Ops of fuzz_agent.cc: 0 register reply, 1 view, 2 grant, 3 assignment,
// 4 fetch, 5 report, 6 raw scheduler, 7 raw peer, 8 shutdown. A node is
// (1, n); scheduler frames end with an extra-frames byte (1 = none).
void AgentSeeds() {
  for (int authenticated = 0; authenticated < 2; ++authenticated) {
    FuzzProgram p;
    p.U8(static_cast<uint8_t>(1 | (authenticated ? 4 : 0) | 16));  // 2 credits, local manifest
    p.U8(0).U8(1).U8(0).U8(1).U8(1).U8(1).U8(0).U8(1);             // registered as node 0, digests
    p.U8(1).U8(2).U8(3).U8(1).U8(0).U8(0).U8(1).U8(1).U8(1).U8(1).U8(2).U8(2).U8(1);   // view: a, b, c
    p.U8(2).U8(1).U8(1).U8(1).U8(3).U8(1).U8(4).U8(1).U8(5).U8(1).U8(32).U8(2).U8(1);  // grant 4,5,32 to b
    p.U8(4).U8(7).U8(1).U8(1).U8(1).U8(2).U8(1).U8(4).U8(1).U8(5).U8(1).U8(1);         // b fetches 4,5
    p.U8(4).U8(8).U8(1).U8(1).U8(1).U8(1).U8(1).U8(32).U8(1).U8(1);  // b fetches 32 (corrupt)
    p.U8(3).U8(1).U8(0).U8(1).U8(2).U8(1).U8(6).U8(1).U8(40).U8(1).U8(1).U8(0).U8(1).U8(1).U8(1);  // run
    p.U8(5).U8(0).U8(0);                                                                           // done
    p.U8(8).U8(1);                                                                                 // shutdown
    Write("agent", authenticated ? "authenticated" : "insecure", p.bytes());
  }
}

// ------------------------------------------------------------ ring
void RingSeeds() {
  FuzzProgram hellos;
  hellos.U8(0).U8(2 /*3 members*/).U8(0 /*self*/).U8(2 /*round*/);
  for (int i = 0; i < 3; ++i) {
    loft::agent::MemberHello h;
    h.b = 4 + i;
    h.last_round = i == 2 ? 0 : 1;
    h.hash = i == 2 ? 5 : 7;
    h.reports = i == 0;
    h.partition = 10 + static_cast<uint64_t>(i);
    const auto bytes = loft::agent::EncodeHello(h);
    hellos.Bytes(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (i != 0) hellos.U8(i == 2 ? 0 : 1);  // member 2 is past the round
  }
  hellos.U8(0).U8(3 /*trimmed mean*/).U8(1);
  Write("ring", "hellos", hellos.bytes());

  // Exchanges: every receive gets the right size (a byte != 0 mod 8, then
  // the payload) carrying small floats.
  auto exchange = [](uint8_t world, uint8_t tolerance, bool int8, const std::string& name) {
    FuzzProgram p;
    p.U8(1).U8(world).U8(3 /*trimmed mean*/).U8(0).U8(tolerance).U8(int8 ? 1 : 0).U8(7 /*8 floats*/).U8(0);
    for (int msg = 0; msg < 24; ++msg) {
      p.U8(1);
      for (int k = 0; k < 32; ++k) p.U8(static_cast<uint8_t>(k % 3 == 0 ? 0x3f : 0x00));
    }
    Write("ring", name, p.bytes());
  };
  exchange(1, 0, false, "plain");
  exchange(1, 1, false, "verified");
  exchange(2, 2, true, "verified_int8");
}

// ------------------------------------------------------------ adopt_state
void AdoptStateSeeds() {
  for (int mlp = 0; mlp < 2; ++mlp) {
    loft::models::ModelOptions mo;
    mo.kind = mlp ? loft::models::ModelKind::kMlp : loft::models::ModelKind::kSoftmax;
    mo.input_dim = 4;
    mo.num_classes = 3;
    mo.hidden = {3};
    auto model = loft::models::MakeModel(mo);
    auto sgd = loft::models::Sgd::Create({}, (*model)->num_params());
    if (!model.ok() || !sgd.ok()) Fail("model");
    (*model)->Init(11);
    std::vector<float> grad(static_cast<size_t>((*model)->num_params()), 0.25f);
    if (!sgd->Step((*model)->params(), grad).ok()) Fail("step");
    auto ck = loft::models::EncodeCheckpoint(**model, *sgd);
    if (!ck.ok()) Fail("checkpoint");
    const uint64_t hash = loft::models::TrainingStateHash(**model, *sgd);
    FuzzProgram answer;
    answer.U64(0 /*last round*/).U64(hash).Raw(std::string(ck->data(), ck->size()));
    const uint8_t bit = mlp ? 8 : 0;
    Write("adopt_state", mlp ? "mlp_agreed" : "softmax_agreed",
          FuzzProgram().U8(2 | bit).U64(0).Raw(answer.bytes()).bytes());
    Write("adopt_state", mlp ? "mlp_rehash" : "softmax_rehash",
          FuzzProgram().U8(5 | bit).U64(0).Raw(answer.bytes()).bytes());
    Write("adopt_state", mlp ? "mlp_wrong_round" : "softmax_wrong_round",
          FuzzProgram().U8(bit).U64(3).Raw(answer.bytes()).bytes());
  }
}

// ------------------------------------------------------------ state_restore
void StateRestoreSeeds() {
  auto spec = loft::ParseClusterSpec(loft::fuzz::kStateRestoreSpec, "fuzz");
  if (!spec.ok()) Fail(spec.status().ToString());
  auto d = loft::sched::JobDriver::Create(*spec, "loft", {});
  if (!d.ok()) Fail(d.status().ToString());
  auto& driver = **d;
  std::vector<loft::v1::StateUpdate> journal;
  auto take = [&](loft::StatusOr<loft::sched::Updates> u) {
    if (!u.ok()) Fail(u.status().ToString());
    journal.insert(journal.end(), u->begin(), u->end());
    return *u;
  };
  double now = 1;
  take(driver.RegisterWorker(0, now));
  take(driver.RegisterWorker(1, now));
  std::string snapshot;
  size_t snapshot_at = 0;
  for (int it = 0; it < 5; ++it) {
    const auto planned = take(driver.PlanNextIteration(now += 1));
    const auto parts = loft::sched::JobDriver::PartitionsToSend(planned);
    for (const auto& p : parts) take(driver.OnPartitionSent(p.id(), p.attempt(), now += 1));
    for (size_t k = 0; k < parts.size(); ++k) {
      const auto& p = parts[k];
      if (it == 2 && k == 0) {
        loft::v1::PartitionFailed f;
        f.set_partition_id(p.id());
        f.set_attempt(p.attempt());
        f.set_node(p.worker());
        f.add_bad_samples(p.sample_ids(0));
        take(driver.OnPartitionFailed(f, now += 1));
        continue;
      }
      loft::v1::PartitionDone done;
      done.set_partition_id(p.id());
      done.set_attempt(p.attempt());
      done.set_node(p.worker());
      done.mutable_timings()->set_compute_ms(3 + static_cast<double>(k));
      done.mutable_timings()->set_local_samples(p.sample_ids_size());
      take(driver.OnPartitionDone(done, now += 1));
    }
    if (it == 2) {
      snapshot = driver.state().ToSnapshot().SerializeAsString();
      snapshot_at = journal.size();
    }
  }
  take(driver.OnWorkerDead(1, "seed", now += 1));
  auto prefixed = [](FuzzProgram& p, const std::string& s) {
    if (s.size() > 0xffff) Fail("seed message too long");
    p.U16(static_cast<uint16_t>(s.size())).Raw(s);
  };
  FuzzProgram all, after;
  all.U8(0).U16(0);
  for (const auto& u : journal) prefixed(all, u.SerializeAsString());
  after.U8(0);
  prefixed(after, snapshot);
  for (size_t k = snapshot_at; k < journal.size(); ++k) prefixed(after, journal[k].SerializeAsString());
  Write("state_restore", "journal", all.bytes());
  Write("state_restore", "snapshot_then_journal", after.bytes());
  loft::v1::StateSnapshot snap;
  snap.ParseFromString(snapshot);
  Write("state_restore", "snapshot_value",
        FuzzProgram().U8(2).Raw(loft::sched::Journal::EncodeSnapshotValue(snap)).bytes());
  Write("state_restore", "entry_value",
        FuzzProgram().U8(1).Raw(loft::sched::Journal::EncodeValue(journal[journal.size() / 2])).bytes());
}

// ------------------------------------------------------------ loaders
void LoaderSeeds() {
  loft::server::SchedulerOptions so;
  so.cluster_spec = "examples/clusters/homogeneous.yaml";
  Write("loaders", "scheduler_options", std::string(1, '\0') + loft::server::SchedulerOptionsToYaml(so));
  loft::agent::AgentConfig ac;
  ac.node_name = "edge-0";
  Write("loaders", "agent_config", std::string(1, '\1') + loft::agent::AgentConfigToYaml(ac));
  std::vector<loft::server::SessionEntry> sessions(2);
  sessions[0].node = 0;
  sessions[0].peer_endpoint = "tcp://127.0.0.1:7001";
  sessions[1].node = 1;
  sessions[1].ring_endpoint = "tcp://127.0.0.1:8001";
  sessions[1].credits = 3;
  Write("loaders", "sessions", std::string(1, '\2') + loft::server::SessionsToJson(sessions));
  std::string digests;
  for (uint64_t id = 0; id < 3; ++id) {
    const std::vector<uint8_t> payload(4, static_cast<uint8_t>(id));
    digests += loft::cache::SampleDigest(id, static_cast<uint16_t>(id), payload);
  }
  const fs::path tmp = g_root / "manifest.tmp";
  if (!loft::cache::WriteManifestFile(tmp.string(), *loft::cache::Manifest::FromDigests(digests)).ok())
    Fail("manifest");
  std::ifstream in(tmp, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(tmp);
  Write("loaders", "manifest", std::string(1, '\3') + file);
  // IDX: 2 images of 2x2, 2 labels.
  FuzzProgram images;
  images.Raw(std::string("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02", 16));
  images.Raw("abcdefgh");
  const std::string labels("\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07", 10);
  FuzzProgram idx;
  idx.U8(4).U16(static_cast<uint16_t>(images.bytes().size())).Raw(images.bytes()).Raw(labels);
  Write("loaders", "idx", idx.bytes());
}

// ------------------------------------------------------------ consumer
// Ops of fuzz_consumer.cc: 0/1 a batch (then built or raw), 2 all-reduce,
// 3 state sync, 4 report.
void ConsumerBatch(FuzzProgram& p, uint8_t partition, int n) {
  p.U8(0).U8(1 /*built*/).U8(partition).U8(1 /*ring*/).U8(1 /*round 1*/).U8(static_cast<uint8_t>(n));
  for (int k = 0; k < n; ++k) p.U16(static_cast<uint16_t>(100 + k)).U8(1 /*label 3*/).U8(1).U8(4 /*4 bytes*/);
  p.U8(3 /*no skew*/).U8(1 /*one payload frame*/).U8(1 /*of their sum*/);
  for (int k = 0; k < 4 * n; ++k) p.U8(static_cast<uint8_t>(k));
}

void ConsumerSeeds() {
  FuzzProgram p;
  ConsumerBatch(p, 5, 3);
  p.U8(4).U8(0);  // report
  ConsumerBatch(p, 6, 2);
  p.U8(2).U8(3).U8(0 /*applied*/).Bytes("").U8(1).Bytes("");  // all-reduce of 3 floats
  ConsumerBatch(p, 7, 0);                                     // an empty training batch
  p.U8(2).U8(3).U8(3 /*stale*/).Bytes("").U8(1).Bytes("state-blob").U8(1);
  p.U8(3).U8(1).U8(1).U8(1).Bytes("majority-state");  // sync
  loft::v1::Envelope hb;
  hb.mutable_heartbeat()->set_node(1);
  p.U8(1).U8(0 /*raw*/).Bytes(*loft::Encode(hb)).U8(0);  // another type: dropped
  Write("consumer", "batches", p.bytes());
}

// ------------------------------------------------------------ calibrate
void CalibrateSeeds() {
  auto spec = loft::ParseClusterSpec(loft::fuzz::kCalibrateSpec, "cal.yaml");
  if (!spec.ok()) Fail(spec.status().ToString());
  nlohmann::json status = {{"policy", "uniform"}, {"workers", nlohmann::json::array()}};
  for (int i = 0; i < spec->num_nodes(); ++i) {
    const loft::sched::CostParams c = loft::sched::PriorFromSpec(*spec, i);
    status["workers"].push_back({{"name", spec->nodes[i].name},
                                 {"observations", 50},
                                 {"profile",
                                  {{"compute_fixed_ms", c.compute_fixed_ms * 1.5},
                                   {"compute_per_sample_ms", c.compute_per_sample_ms},
                                   {"local_fixed_ms", c.local_fixed_ms},
                                   {"local_per_sample_ms", c.local_per_sample_ms},
                                   {"remote_fixed_ms", c.remote_fixed_ms + 1},
                                   {"remote_per_sample_ms", c.remote_per_sample_ms},
                                   {"uplink_per_sample_ms", c.uplink_per_sample_ms}}}});
  }
  const std::string text = status.dump();
  Write("calibrate", "status", std::string(1, '\0') + text);
  std::string csv = std::string(loft::sched::kIterationsCsvHeader) + "\n";
  for (int it = 0; it < 12; ++it) {
    for (int w = 0; w < 3; ++w) {
      csv += "uniform," + std::to_string(it) + ",0," + spec->nodes[w].name +
             ",32,30,2,1,1,5,0,40,0.1,0.2,0.3," + std::to_string(20 + 5 * w) + ",40," +
             (it == 5 && w == 1 ? "1" : "0") + ",0.05\n";
    }
  }
  FuzzProgram p;
  p.U8(1).U16(static_cast<uint16_t>(text.size())).Raw(text).Raw(csv);
  Write("calibrate", "status_and_iterations", p.bytes());
  FuzzProgram kept;
  kept.U8(3).U16(static_cast<uint16_t>(text.size())).Raw(text).Raw(csv);
  Write("calibrate", "links_kept", kept.bytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  g_root = argv[1];
  SchedulerSeeds();
  AgentSeeds();
  RingSeeds();
  AdoptStateSeeds();
  StateRestoreSeeds();
  LoaderSeeds();
  ConsumerSeeds();
  CalibrateSeeds();
  std::printf("seeds written under %s\n", argv[1]);
  return 0;
}
