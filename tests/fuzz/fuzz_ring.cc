// Fuzz target: what a ring member reads from the other members. The first
// byte picks one of two halves:
//  - hellos (even): one RingHello per member, each a length-prefixed byte
//    string through agent::DecodeHello (refused = no weight, as in
//    ModelTrainer), then the round's pure decisions over them
//    (edge_agent/round_decision.h: Participants, FindFinishedElsewhere,
//    DecideSync, PlanRound);
//  - exchange (odd): one member's models::RingAllReduce::Run over a
//    scripted Transport whose every received message (scatter copies, full
//    results, digests, dispute bitmaps, fetched copies) comes from the
//    input; the plain and the verified ring, with and without int8
//    compression, every reducer. The input running out is a silent member
//    (DeadlineExceeded).
//
// Properties beyond "no crash, no sanitizer report":
//  - an accepted hello re-encodes to a hello that decodes to the same one;
//  - PlanRound gives one weight per member, finite and >= 0, a sorted
//    applied list of partitions members named, and counts `present` right;
//    a sync target's holders are other members;
//  - Run leaves `data` untouched on an error, lists only ring members as
//    malformed or mismatched, and is deterministic: the same messages give
//    the same bits (replicas of a chunk must agree).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/clock.h"
#include "edge_agent/ring_hello.h"
#include "edge_agent/round_decision.h"
#include "fuzz_input.h"
#include "models/ring_allreduce.h"
#include "models/transport.h"

namespace {

using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

void FuzzHellos(FuzzInput& in) {
  loft::agent::RoundHellos x;
  const int n = 1 + in.Below(6);
  const int self = in.Below(n);
  const uint32_t round = in.Below(8);
  for (int i = 0; i < n; ++i) {
    x.members.push_back(i);
    const std::string bytes = in.Bytes();
    auto h = loft::agent::DecodeHello(AsBytes(bytes));
    if (h.ok()) {
      const auto again = loft::agent::EncodeHello(*h);
      auto back = loft::agent::DecodeHello(again);
      if (!back.ok() || back->b != h->b || back->last_round != h->last_round || back->hash != h->hash ||
          back->reports != h->reports || back->partition != h->partition)
        Fail("a hello does not survive re-encoding");
      x.hellos.push_back(*h);
    } else {
      if (h.status().message().empty()) Fail("a refused hello without a reason");
      x.hellos.push_back({});  // no weight
    }
    if (i != self && in.Below(4) == 0) x.past.push_back(i);
  }
  const auto parts = loft::agent::Participants(x);
  if (parts.members.size() != parts.hellos.size()) Fail("Participants: members and hellos differ");
  (void)loft::agent::FindFinishedElsewhere(x, round, 1 + in.Below(3));
  const auto& mine = x.hellos[self];
  const auto sync = loft::agent::DecideSync(self, x, {mine.last_round, mine.hash});
  for (int h : sync.holders)
    if (h == self || h < 0 || h >= n) Fail("sync holder " + std::to_string(h));
  loft::models::ReducerOptions base;
  base.kind = static_cast<loft::models::ReducerKind>(in.Below(6));
  const double global_batch = in.Pick<double>({0, 12, 1e9});
  auto plan = loft::agent::PlanRound(self, round, parts, base, global_batch);
  if (!plan.ok()) return;
  if (plan->weights.size() != parts.members.size()) Fail("PlanRound: one weight per member");
  int present = 0;
  for (double w : plan->weights) {
    if (!std::isfinite(w) || w < 0) Fail("PlanRound: weight " + std::to_string(w));
    present += w > 0;
  }
  if (present != plan->present) Fail("PlanRound: present miscounted");
  if (!std::is_sorted(plan->applied.begin(), plan->applied.end())) Fail("PlanRound: applied not sorted");
  for (const auto& [partition, member] : plan->applied)
    if (partition == 0 || member < 0 || member >= n) Fail("PlanRound: applied names no member's partition");
}

// Rank 0's view of the ring: sends go nowhere, every receive is the input's.
class ScriptedTransport : public loft::models::Transport {
 public:
  ScriptedTransport(FuzzInput in, int world) : in_(in), world_(world) {}
  int rank() const override { return 0; }
  int world_size() const override { return world_; }
  loft::Status Send(int, uint64_t, std::span<const std::byte>) override { return loft::OkStatus(); }
  loft::StatusOr<std::vector<std::byte>> Recv(int, uint64_t, int64_t) override {
    if (in_.empty()) return loft::DeadlineExceeded("silent member");
    size_t len = 0;
    switch (in_.Below(4)) {
      case 0: len = 32; break;  // a digest
      case 1: len = 1; break;   // a bitmap
      default: len = in_.U8(); break;
    }
    const std::string s = in_.Take(len);
    const auto* b = reinterpret_cast<const std::byte*>(s.data());
    return std::vector<std::byte>(b, b + s.size());
  }
  loft::StatusOr<size_t> RecvInto(int from, uint64_t tag, int64_t timeout_ms,
                                  std::span<std::byte> out) override {
    if (in_.empty()) return loft::DeadlineExceeded("silent member");
    if (in_.Below(8) == 0) return Transport::RecvInto(from, tag, timeout_ms, out);  // any size
    const std::string s = in_.Take(out.size());
    if (s.size() == out.size() && !s.empty()) std::memcpy(out.data(), s.data(), s.size());
    return s.size();
  }
  void SetTagFloor(uint64_t) override {}

 private:
  FuzzInput in_;
  int world_;
};

struct RunResult {
  loft::Status status;
  std::vector<float> data;
  loft::models::AllReduceReport report;
};

RunResult RunOnce(const loft::models::AllReduceOptions& opts, const loft::models::RingView& view, int world,
                  const std::vector<float>& input, const std::vector<double>& weights, FuzzInput script) {
  ScriptedTransport t(script, world);
  loft::ManualClock clock;
  loft::models::RingAllReduce ring(&t, opts, &clock);
  RunResult r;
  r.data = input;
  r.status = ring.Run(view, 3, r.data, weights, &r.report);
  return r;
}

void FuzzExchange(FuzzInput& in) {
  const int world = 2 + in.Below(4);
  loft::models::RingView view;
  view.view = 1;
  for (int i = 0; i < world; ++i) view.members.push_back(i);
  loft::models::AllReduceOptions opts;
  opts.reducer.kind = static_cast<loft::models::ReducerKind>(in.Below(6));
  opts.reducer.trim_count = in.Below(2);
  opts.reducer.krum_f = 0;
  opts.tolerance = in.Below(3) == 0 ? 0 : 1 + in.Below(2);
  opts.compression = in.Bool() ? loft::models::Compression::kInt8 : loft::models::Compression::kNone;
  opts.timeout_ms = 1000;
  if (!opts.Validate().ok()) return;
  std::vector<float> input(1 + in.Below(24));
  for (size_t k = 0; k < input.size(); ++k) input[k] = static_cast<float>(k) * 0.5f - 3.0f;
  std::vector<double> weights;
  if (in.Bool())
    for (int i = 0; i < world; ++i) weights.push_back(1 + in.Below(3));
  const RunResult a = RunOnce(opts, view, world, input, weights, in);
  if (!a.status.ok()) {
    if (a.data != input) Fail("Run changed data on an error: " + a.status.ToString());
    return;
  }
  for (int r : a.report.malformed_from)
    if (r <= 0 || r >= world) Fail("malformed_from lists rank " + std::to_string(r));
  for (int r : a.report.chunk_mismatch_from)
    if (r < 0 || r >= world) Fail("chunk_mismatch_from lists rank " + std::to_string(r));
  const RunResult b = RunOnce(opts, view, world, input, weights, in);
  if (!b.status.ok() || std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) != 0)
    Fail("the same messages reduced to other bits");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  if ((in.U8() & 1) == 0)
    FuzzHellos(in);
  else
    FuzzExchange(in);
  return 0;
}
