// Fuzz target: libloft's consumer side of the agent's consumer endpoint
// (capi: loft_consumer_* and loft_batch_*, capi/src/consumer_session.cc),
// i.e. how a training program parses what an agent sends it. The harness
// plays the agent: a ROUTER bound at an ipc:// endpoint in the scratch
// directory (once per process); each input opens a consumer through the
// C API and sends it, from the program (fuzz_input.h):
//   0: a ConsumerBatch envelope (ids, labels, payload sizes, ring, round;
//      the counts may disagree) and payload frames (0, 1 or 2; sizes may
//      disagree with the envelope), then loft_consumer_next;
//   1: raw frames (an envelope's bytes and a payload), then
//      loft_consumer_next;
//   2: a ConsumerAggregate for the last batch (outcome, data frame of any
//      size, a stale state [u64 length][state][data] that may lie about its
//      length), sent before loft_batch_allreduce so it never waits;
//   3: a ConsumerSyncReply (round, error, an optional state frame), then
//      loft_consumer_sync_state;
//   4: loft_batch_report of the last batch.
//
// Properties beyond "no crash, no sanitizer report":
//  - a batch the harness built consistently (as many labels and payload
//    sizes as ids, one payload frame of their sum) comes back with exactly
//    its ids, labels and payload bytes, and every accessor agrees with the
//    arrays (payload i is the slice of the payloads at its offset; out of
//    range gives 0 / NULL / -1); an inconsistent one is refused with an
//    error;
//  - loft_batch_allreduce returns -1 with an error, or 0/1/2; with 1 the
//    data is the aggregate frame; with 2 the state is the blob the frame
//    held; loft_batch_state is NULL unless it returned 2;
//  - every error message is non-empty.
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "core/codec.h"
#include "fuzz_input.h"
#include "loft/loft.h"

namespace {

using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;
namespace v1 = loft::v1;

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

// The agent's side: one ROUTER for the process.
struct Agent {
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::string endpoint;
  Agent() {
    endpoint = "ipc://" +
               (loft::fuzz::ScratchBase() / ("loft-fuzz-consumer-" + std::to_string(::getpid()))).string();
    router.set(zmq::sockopt::linger, 0);
    router.bind(endpoint);
  }
  // The routing id of the consumer that just said hello (drops anything
  // else queued from earlier consumers).
  std::string AwaitHello() {
    for (;;) {
      std::vector<zmq::message_t> frames;
      try {
        if (!zmq::recv_multipart(router, std::back_inserter(frames))) Fail("agent receive");
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;  // libFuzzer's timer (-timeout) interrupts waits
        Fail(std::string("agent receive: ") + e.what());
      }
      if (frames.size() < 2) continue;
      auto env = loft::Decode(frames[1].to_string_view());
      if (env.ok() && env->has_consumer_hello()) return frames[0].to_string();
    }
  }
  void Send(const std::string& id, const std::vector<std::string>& frames) {
    router.send(zmq::buffer(id), zmq::send_flags::sndmore);
    for (size_t k = 0; k < frames.size(); ++k)
      router.send(zmq::buffer(frames[k]),
                  k + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // Drops what consumers sent (reports, all-reduce requests).
  void Drain() {
    zmq::message_t m;
    while (router.recv(m, zmq::recv_flags::dontwait)) {
    }
  }
};

Agent& TheAgent() {
  static Agent a;
  return a;
}

std::string Frame(const v1::Envelope& env) {
  auto b = loft::Encode(env);
  if (!b.ok()) Fail("encode: " + b.status().ToString());
  return *b;
}

void CheckError(char* err, const char* what) {
  if (err == nullptr) Fail(std::string(what) + ": NULL without an error");
  if (*err == '\0') Fail(std::string(what) + ": an empty error");
  loft_free(err);
}

struct Sent {
  v1::ConsumerBatch batch;
  std::string payload;
  bool built = false;  // by BuildBatch (not raw bytes)
  bool reported = false;
  bool allreduced = false;
  bool consistent = false;
};

Sent BuildBatch(FuzzInput& in, std::vector<std::string>* frames) {
  Sent s;
  auto& b = s.batch;
  b.set_partition_id(in.U8());
  b.set_ring(in.Bool());
  b.set_round(in.Pick<int64_t>({0, 1, 7, -1}));
  const int n = in.Below(6);
  uint64_t sum = 0;
  for (int k = 0; k < n; ++k) {
    b.add_sample_ids(in.U16());
    b.add_labels(in.Pick<int32_t>({0, 3, 9, -1}));
    const uint32_t sz = in.Below(8) == 0 ? in.U32() : in.Below(16);
    b.add_payload_sizes(sz);
    sum += sz;
  }
  const int skew = in.Below(8);
  if (skew == 0 && n > 0) b.mutable_labels()->RemoveLast();
  if (skew == 1) b.add_payload_sizes(1);
  v1::Envelope env;
  *env.mutable_consumer_batch() = b;
  frames->push_back(Frame(env));
  const int payload_frames = in.Below(8) == 0 ? in.Below(3) : 1;
  const size_t payload_bytes = in.Below(8) == 0 ? in.U8() : (sum < 4096 ? sum : 0);
  for (int k = 0; k < payload_frames; ++k) {
    std::string payload = in.Take(payload_bytes);
    payload.resize(payload_bytes, 'p');
    frames->push_back(std::move(payload));
  }
  if (payload_frames == 1) s.payload = frames->back();
  s.built = true;
  s.consistent =
      b.labels_size() == n && b.payload_sizes_size() == n && payload_frames == 1 && payload_bytes == sum;
  return s;
}

void CheckBatch(const loft_batch_t* batch, const Sent& s) {
  const int64_t n = loft_batch_count(batch);
  if (loft_batch_partition_id(batch) != s.batch.partition_id()) Fail("batch partition id differs");
  if (n != s.batch.sample_ids_size()) Fail("batch count differs");
  size_t len = 0;
  const uint8_t* all = loft_batch_payloads(batch, &len);
  if (len != s.payload.size() || (len > 0 && std::memcmp(all, s.payload.data(), len) != 0))
    Fail("batch payloads differ");
  const uint64_t* ids = loft_batch_sample_ids(batch);
  const int32_t* labels = loft_batch_labels(batch);
  if (n > 0 && (ids == nullptr || labels == nullptr)) Fail("batch arrays missing");
  size_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] != s.batch.sample_ids(static_cast<int>(i)) || loft_batch_sample_id(batch, i) != ids[i])
      Fail("batch sample id differs");
    if (labels[i] != s.batch.labels(static_cast<int>(i)) || loft_batch_label(batch, i) != labels[i])
      Fail("batch label differs");
    size_t plen = 0;
    const uint8_t* p = loft_batch_payload(batch, i, &plen);
    if (plen != s.batch.payload_sizes(static_cast<int>(i)) || (plen > 0 && p != all + at))
      Fail("payload " + std::to_string(i) + " is not its slice");
    at += plen;
  }
  size_t plen = 7;
  if (loft_batch_payload(batch, n, &plen) != nullptr || plen != 0 || loft_batch_label(batch, n) != -1 ||
      loft_batch_sample_id(batch, -1) != 0)
    Fail("out-of-range accessors do not give NULL / -1 / 0");
}

void AllReduce(FuzzInput& in, Agent& agent, const std::string& id, loft_batch_t* batch, Sent& s) {
  std::vector<float> data(in.Below(5), 1.5f);
  if (s.reported || s.allreduced || (data.empty() && s.batch.sample_ids_size() > 0)) {
    // Refused before anything is sent (nothing is pre-sent: it would stay queued).
    char* err = nullptr;
    if (loft_batch_allreduce(batch, data.data(), data.size(), &err) != -1) Fail("a refused all-reduce ran");
    return CheckError(err, "loft_batch_allreduce");
  }
  s.allreduced = true;
  v1::Envelope env;
  auto* a = env.mutable_consumer_aggregate();
  a->set_partition_id(s.batch.partition_id());
  a->set_round(s.batch.round());
  const int outcome = in.Below(5);
  a->set_outcome(static_cast<v1::ConsumerAggregate::Outcome>(outcome % 4));
  a->set_message(in.Bytes());
  std::vector<std::string> frames{Frame(env)};
  std::string aggregate(data.size() * sizeof(float), '\0');
  for (size_t k = 0; k < aggregate.size(); ++k) aggregate[k] = static_cast<char>(k * 3);
  if (in.Below(6) == 0) aggregate = in.Bytes();
  std::string state = in.Bytes();
  if (a->outcome() == v1::ConsumerAggregate::STALE) {
    // [u64 state length][state][aggregate]; a lying length (fewer bytes
    // than the state) moves the split: what the format then says is the
    // state and the aggregate is what must come back.
    uint64_t claimed = in.Below(6) == 0 ? in.U64() : state.size();
    std::string blob(sizeof claimed, '\0');
    std::memcpy(blob.data(), &claimed, sizeof claimed);
    const std::string rest = state + aggregate;
    frames.push_back(blob + rest);
    if (claimed <= rest.size()) {
      state = rest.substr(0, claimed);
      aggregate = rest.substr(claimed);
    }
  } else if (outcome != 4) {
    frames.push_back(aggregate);
  }
  agent.Send(id, frames);
  char* err = nullptr;
  const std::vector<float> before = data;
  const int r = loft_batch_allreduce(batch, data.data(), data.size(), &err);
  if (loft::fuzz::Tracing()) std::fprintf(stderr, "allreduce: %d %s\n", r, err != nullptr ? err : "");
  size_t len = 9;
  const uint8_t* st = loft_batch_state(batch, &len);
  if (r == -1) {
    CheckError(err, "loft_batch_allreduce");
    return;
  }
  if (err != nullptr) Fail("allreduce succeeded with an error");
  if (r < 0 || r > 2) Fail("allreduce returned " + std::to_string(r));
  if (r >= 1 && !aggregate.empty() && std::memcmp(data.data(), aggregate.data(), aggregate.size()) != 0)
    Fail("aggregate not applied");
  if (r == 2 && (len != state.size() || (len > 0 && std::memcmp(st, state.data(), len) != 0)))
    Fail("stale state differs");
  if (r != 2 && (st != nullptr || len != 0)) Fail("a state without a stale answer");
  if (r == 0 && data != before) Fail("a carried round changed the data");
}

void SyncState(FuzzInput& in, Agent& agent, const std::string& id, loft_consumer_t* c) {
  v1::Envelope env;
  env.mutable_consumer_sync_reply()->set_round(in.Pick<int64_t>({-1, 0, 5}));
  if (in.Below(4) == 0) env.mutable_consumer_sync_reply()->set_error("no majority");
  std::vector<std::string> frames{Frame(env)};
  if (in.Bool()) frames.push_back(in.Bytes());
  agent.Send(id, frames);
  int64_t round = 0;
  size_t len = 0;
  char* err = nullptr;
  uint8_t* blob = loft_consumer_sync_state(c, 2000, &round, &len, &err);
  if (err != nullptr) return CheckError(err, "loft_consumer_sync_state");
  loft_free(blob);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  Agent& agent = TheAgent();
  agent.Drain();
  FuzzInput in(data, size);
  char* err = nullptr;
  loft_consumer_t* c = loft_consumer_open(agent.endpoint.c_str(), &err);
  if (c == nullptr) Fail("consumer open: " + std::string(err ? err : "?"));
  const std::string id = agent.AwaitHello();
  loft_batch_t* last = nullptr;
  Sent last_sent;
  for (int ops = 0; ops < 32 && !in.empty(); ++ops) {
    switch (in.Below(5)) {
      case 0:
      case 1: {
        std::vector<std::string> frames;
        Sent s;
        if (in.Bool()) {
          s = BuildBatch(in, &frames);
        } else {
          frames.push_back(in.Bytes());
          if (in.Bool()) frames.push_back(in.Bytes());
        }
        agent.Send(id, frames);
        // Raw frames of another message type are dropped by the consumer:
        // it would wait for a batch until the timeout.
        if (!s.built) {
          auto env = loft::Decode(frames[0]);
          if (env.ok() && !env->has_consumer_batch() && !env->has_consumer_refused()) break;
        }
        err = nullptr;
        loft_batch_t* b = loft_consumer_next(c, 2000, &err);
        if (loft::fuzz::Tracing())
          std::fprintf(stderr, "next: %s\n", b != nullptr ? "a batch" : (err != nullptr ? err : "?"));
        if (b == nullptr) {
          if (s.consistent) Fail("a consistent batch was refused: " + std::string(err ? err : ""));
          CheckError(err, "loft_consumer_next");
          break;
        }
        if (s.built && !s.consistent) Fail("an inconsistent batch was accepted");
        if (s.consistent) CheckBatch(b, s);
        if (last != nullptr) loft_batch_destroy(last);
        last = b;
        last_sent = s;
        break;
      }
      case 2:
        if (last != nullptr && last_sent.consistent && last_sent.batch.ring())
          AllReduce(in, agent, id, last, last_sent);
        break;
      case 3: SyncState(in, agent, id, c); break;
      default:
        if (last != nullptr) {
          err = nullptr;
          const double ms = in.Pick<double>({1.0, -1.0, 0.0});
          loft_batch_report(last, ms, &err);
          if (err != nullptr)
            CheckError(err, "loft_batch_report");
          else
            last_sent.reported = true;
        }
        break;
    }
  }
  if (last != nullptr) loft_batch_destroy(last);
  loft_consumer_close(c);
  return 0;
}
