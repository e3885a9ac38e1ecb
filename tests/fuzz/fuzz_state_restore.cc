// Fuzz target: what a restarted scheduler reads back from its journal
// (scheduler/journal.h): a snapshot restored into a fresh JobDriver
// (SchedulerState::RestoreSnapshot), then journal entries replayed after
// it (JobDriver::Replay), and the value codecs of both.
//
// Input: a mode byte, then
//   mode % 3 == 0: u16-length-prefixed serialized StateSnapshot (empty =
//                  none), then u16-length-prefixed serialized StateUpdates
//                  until the input ends;
//   mode % 3 == 1: one journal entry value (Journal::DecodeValue);
//   mode % 3 == 2: one snapshot value (Journal::DecodeSnapshotValue).
// The spec is fixed: 2 nodes, 48 samples, policy loft (mode bit 2:
// uniform), job id 1 (the snapshots a scheduler with this spec writes;
// make_seeds.cc writes such a run's snapshot and entries as seeds).
//
// Properties beyond "no crash, no sanitizer report":
//  - a refusal names what was wrong (non-empty message);
//  - a restored or replayed state snapshots completely: its ToSnapshot
//    restored into another fresh driver gives the same Digest, and that
//    snapshot re-encodes through the journal's value codec unchanged;
//  - an accepted journal value re-encodes to the same update.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "fuzz_input.h"
#include "fuzz_specs.h"
#include "scheduler/driver.h"
#include "scheduler/journal.h"

namespace {

using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
  return true;
}();

}  // namespace

namespace {

const loft::ClusterSpec& Spec() {
  static const loft::ClusterSpec spec = [] {
    auto s = loft::ParseClusterSpec(loft::fuzz::kStateRestoreSpec, "fuzz");
    if (!s.ok()) Fail("the target's own spec: " + s.status().ToString());
    return *s;
  }();
  return spec;
}

std::unique_ptr<loft::sched::JobDriver> Fresh(const char* policy) {
  auto d = loft::sched::JobDriver::Create(Spec(), policy, {});
  if (!d.ok()) Fail("driver: " + d.status().ToString());
  return std::move(*d);
}

std::string Prefixed(FuzzInput& in) {
  return in.Take(in.U16());
}

void CheckSnapshotRoundTrip(const loft::sched::JobDriver& d, const char* policy) {
  const loft::v1::StateSnapshot snap = d.state().ToSnapshot();
  auto again = Fresh(policy);
  loft::Status st = again->Restore(snap);
  if (!st.ok()) Fail("a state's own snapshot does not restore: " + st.ToString());
  if (again->state().Digest() != d.state().Digest())
    Fail("restored snapshot differs:\n" + d.state().ToJson() + "\n" + again->state().ToJson());
  auto back = loft::sched::Journal::DecodeSnapshotValue(5, loft::sched::Journal::EncodeSnapshotValue(snap));
  if (!back.ok()) Fail("a snapshot does not survive the journal's codec: " + back.status().ToString());
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  if (!differ.Compare(*back, snap)) Fail("a snapshot changes through the journal's codec:\n" + diff);
}

void FuzzRestore(FuzzInput& in, const char* policy) {
  auto d = Fresh(policy);
  const std::string snap_bytes = Prefixed(in);
  if (!snap_bytes.empty()) {
    loft::v1::StateSnapshot snap;
    if (!snap.ParseFromString(snap_bytes)) return;
    loft::Status st = d->Restore(snap);
    if (!st.ok()) {
      if (st.message().empty()) Fail("a refused snapshot without a reason");
      return;  // the state must be discarded
    }
    CheckSnapshotRoundTrip(*d, policy);
  }
  std::vector<loft::v1::StateUpdate> updates;
  while (!in.empty()) {
    loft::v1::StateUpdate u;
    if (!u.ParseFromString(Prefixed(in))) return;
    updates.push_back(std::move(u));
  }
  loft::Status st = d->Replay(updates);
  if (loft::fuzz::Tracing())
    std::fprintf(stderr, "replayed %zu updates: %s (view %lld, next iteration %lld)\n", updates.size(),
                 st.ToString().c_str(), static_cast<long long>(d->state().view()),
                 static_cast<long long>(d->state().next_iteration()));
  if (!st.ok()) {
    if (st.message().empty()) Fail("a refused journal without a reason");
    return;
  }
  CheckSnapshotRoundTrip(*d, policy);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  FuzzInput in(data, size);
  const uint8_t mode = in.U8();
  const char* policy = (mode & 4) ? "uniform" : "loft";
  switch (mode % 3) {
    case 0: FuzzRestore(in, policy); break;
    case 1: {
      auto u = loft::sched::Journal::DecodeValue(9, in.Take(in.remaining()));
      if (!u.ok()) {
        if (u.status().message().find('9') == std::string::npos) Fail("a refused entry that is not named");
        break;
      }
      auto back = loft::sched::Journal::DecodeValue(9, loft::sched::Journal::EncodeValue(*u));
      if (!back.ok() || !google::protobuf::util::MessageDifferencer::Equals(*back, *u))
        Fail("an entry does not survive the journal's codec");
      break;
    }
    default: {
      auto s = loft::sched::Journal::DecodeSnapshotValue(9, in.Take(in.remaining()));
      if (!s.ok() && s.status().message().find('9') == std::string::npos)
        Fail("a refused snapshot that is not named");
      break;
    }
  }
  return 0;
}
