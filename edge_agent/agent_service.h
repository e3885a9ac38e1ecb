// AgentService: the middle layer of loft-agent. Protobuf in, protobuf
// out, no sockets: the ZmqAgentServer hands it decoded frames and sends
// what it returns.
//
// - Peer path: HandlePeer(frame, user) → a FetchReply header plus the raw
//   records (one MultiGetRecords), or an Error. A FetchRequest.decoded
//   (the requester's partition has this node in Partition.decoded_from)
//   is checked here and then handed back to the caller (PeerReply::decoded)
//   to be answered by ServeDecoded off the poll thread (each sample
//   preprocessed on the decode pool; SetDecodePool, README "Decoded
//   serving"). Ids are served only if a
//   ServeGrant from the scheduler lists them for (partition, requester)
//   and, when the connection is authenticated, the CURVE User-Id is the
//   requester's node name in the current view.
// - Scheduler path: HandleScheduler(frame) applies RegisterReply,
//   MembershipView, ServeGrant, PartitionAssignment, Shutdown and returns
//   what to run and what to answer.
// - PartitionRunner (below) reads a partition (local RocksDB reads and
//   peer fetches concurrently), verifies every record, computes, and
//   builds the PartitionDone / PartitionFailed report.
//
// Not responsible for: sockets, threads, retries of whole partitions
// (the scheduler re-plans failed ones), planning.
// Thread-safety: HandlePeer/HandleScheduler/Make* are called from one
// thread (the poll loop). PeerFor(), node() and ServeDecoded() are
// thread-safe (the partition threads and DecodedServer call them). PartitionRunner is used by one thread at
// a time per method (Read and Finish may run on different threads).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/sample_cache.h"
#include "core/clock.h"
#include "core/log_limiter.h"
#include "core/metrics.h"
#include "core/proto/loft.pb.h"
#include "core/read_ahead.h"
#include "core/status.h"
#include "edge_agent/exact_sleep.h"
#include "edge_agent/grant_table.h"
#include "edge_agent/sample_guard.h"
#include "edge_agent/seen_assignments.h"
#include "edge_agent/trainer.h"

namespace boost::asio {
class thread_pool;
}  // namespace boost::asio

namespace loft::preprocess {
class PreprocessPool;
}  // namespace loft::preprocess

namespace loft::agent {

// The metrics loft-agent exports (all prefixed loft_agent_).
struct AgentMetrics {
  metrics::CounterFamily* rejected_frames = nullptr;  // {socket, reason}
  metrics::CounterFamily* fetch_requests = nullptr;   // {result}
  metrics::Counter* served_samples = nullptr;
  metrics::Counter* served_bytes = nullptr;
  metrics::CounterFamily* partitions = nullptr;      // {result}
  metrics::CounterFamily* fetched_bytes = nullptr;   // {peer}
  metrics::HistogramFamily* partition_ms = nullptr;  // {phase}
  metrics::Gauge* in_flight = nullptr;
  metrics::Gauge* grants = nullptr;
  metrics::Counter* scheduler_errors = nullptr;
  metrics::CounterFamily* ring_offences = nullptr;     // {node, reason} (edge_agent/ring_guard.h)
  metrics::CounterFamily* poisoned_samples = nullptr;  // {peer}: refused by the manifest check
  // {kind}: log lines a peer's messages would have caused, held back
  // (core/log_limiter.h PeerLogLimits; the agent's limiters share it).
  metrics::CounterFamily* log_suppressed = nullptr;

  static StatusOr<AgentMetrics> Create(metrics::Registry* registry);
};

// Maps a codec error to a metric reason: oversized, version, no_body, undecodable.
std::string RejectReason(const Status& decode_error);

struct PeerReply {
  v1::Envelope header;         // FetchReply or Error
  cache::RecordBatch records;  // raw frames after the header (FetchReply only)
  // Set by HandlePeer instead of `header`: a FetchRequest.decoded that
  // passed every check (its grant is consumed). Its reply is
  // AgentService::ServeDecoded(*decoded), which the caller runs off the
  // poll thread (DecodedServer) and sends to the same requester.
  std::optional<v1::FetchRequest> decoded;
};

struct SchedulerEffects {
  std::vector<v1::Partition> run;          // accepted partitions, in order
  std::vector<v1::Envelope> to_scheduler;  // replies (Failed for refused assignments, Error)
  int credits_to_return = 0;               // CreditGrants to send after `to_scheduler`
  bool registered = false;                 // a RegisterReply arrived
  bool shutdown = false;
  // A RegisterReply named a different job than the one this agent already
  // registered for (a fresh scheduler journal): the agent must restart so
  // that it trains the new job from fresh parameters. Holds the reason.
  std::string new_job;
};

struct PeerInfo {
  int32_t node = -1;
  std::string name;
  std::string endpoint;
};

struct AgentServiceOptions {
  std::string node_name;
  std::string peer_endpoint;      // advertised
  int credits = kDefaultCredits;  // the agent config's `credits` (core/read_ahead.h)
  size_t max_message_bytes = 16u << 20;
  size_t max_grants = 4096;
  bool authenticated = false;  // CURVE on: peers must present their node's key
  std::string ring_endpoint;   // advertised all-reduce endpoint (training); empty = none
  // Called (on the thread handling scheduler messages) with every MembershipView.
  std::function<void(const v1::MembershipView&)> on_view;
  // How many of these nodes (the current view's members but this one) have
  // a handshaken peer-fetch connection (PeerFetcher::HandshakenAmong); its
  // result goes into every heartbeat (Heartbeat.peers_ready). Null = 0.
  std::function<int(const std::vector<int32_t>&)> peers_ready;
  // Receives the dataset manifest of each RegisterReply (may be null).
  SampleGuard* guard = nullptr;
  // The agent's own copy of the manifest (AgentConfig::manifest; null =
  // none): its root goes in RegisterRequest.manifest_root, and it is used
  // when the scheduler answers with the same root and no digests.
  std::shared_ptr<const cache::Manifest> local_manifest;
  // `byzantine: poison_serve`: serve label-flipped records (attack tests).
  bool poison_serve = false;
  // `byzantine: poison_decoded`: serve honest records but decoded samples
  // with every level inverted (attack tests of the spot check).
  bool poison_decoded = false;
};

class AgentService {
 public:
  AgentService(AgentServiceOptions options, cache::SampleCache* cache, AgentMetrics* metrics);

  PeerReply HandlePeer(std::string_view frame, size_t extra_frames, const std::string& user_id);
  // The reply to a decoded request HandlePeer accepted (PeerReply::decoded):
  // reads the records, preprocesses them on the decode pool (waiting for
  // it) and returns one record per id whose payload is the model input's
  // uint8 levels (cache::EncodeRecord, so the requester checks CRC and id
  // as for any record). Records that fail their check or do not decode: an
  // Error kDataLoss naming them (Error.bad_samples). Thread-safe; may run
  // on any thread, several at once, while the poll thread serves on.
  PeerReply ServeDecoded(const v1::FetchRequest& req);
  SchedulerEffects HandleScheduler(std::string_view frame, size_t extra_frames);

  // Carries this process's incarnation (RegisterRequest.incarnation).
  v1::Envelope MakeRegister(const v1::CacheSummary& summary) const;
  v1::Envelope MakeHeartbeat() const;
  // Members of the current view but this node.
  std::vector<int32_t> ViewPeers() const;
  v1::Envelope MakeCreditGrant(int credits) const;

  // Called when a partition report has been sent (frees a slot).
  void PartitionFinished();
  // Called with each report from PartitionPipeline::TakeReports once it has
  // been sent to the scheduler. A PartitionDone or PartitionFailed ends its
  // partition: frees its slot (PartitionFinished) and returns the
  // CreditGrant{1} to send after it. Any other report (a PeerReport) ends
  // nothing: nullopt, the window unchanged.
  std::optional<v1::Envelope> ReportSent(const v1::Envelope& report);
  int in_flight() const { return in_flight_; }

  // The preprocessing pool decoded requests run on (the agent's own, so
  // inside its CPU quota; borrowed, must outlive the service). Set = this
  // agent serves decoded samples (RegisterRequest.serves_decoded); null =
  // decoded requests are refused (FailedPrecondition). Set it before
  // serving starts: ServeDecoded reads it on other threads.
  void SetDecodePool(preprocess::PreprocessPool* pool) { decode_pool_ = pool; }

  int32_t node() const;
  std::optional<PeerInfo> PeerFor(int32_t node) const;
  int64_t view() const;
  // RegisterReply.heartbeat_interval_ms of the last registration (0 = none).
  int heartbeat_interval_ms() const { return scheduler_heartbeat_ms_.load(); }

 private:
  Status Accept(const v1::Partition& p);

  AgentServiceOptions options_;
  cache::SampleCache* cache_;
  AgentMetrics* metrics_;
  GrantTable grants_;
  PeerLogLimits peer_log_;    // lines a peer or the scheduler can cause
  SeenAssignments seen_;      // accepted (partition, attempt): a re-sent one is dropped
  uint64_t incarnation_ = 0;  // random per process (RegisterRequest.incarnation)
  std::string local_root_;    // options_.local_manifest's root (empty = none)
  int in_flight_ = 0;
  int64_t poison_served_ = 0;                          // poison_serve: forged records sent so far
  preprocess::PreprocessPool* decode_pool_ = nullptr;  // SetDecodePool
  // ServeDecoded's own state (it runs on DecodedServer's threads).
  std::atomic<int64_t> decoded_served_{0};         // samples served decoded so far
  std::atomic<int64_t> poison_decoded_served_{0};  // poison_decoded: forged decoded samples sent so far
  std::mutex decoded_log_mu_;                      // guards decoded_log_
  PeerLogLimits decoded_log_;                      // ServeDecoded's lines a peer can cause

  mutable std::mutex mu_;  // guards node_ and view_
  int32_t node_ = -1;
  uint64_t job_ = 0;  // RegisterReply.job of the first registration (0 = none yet)
  v1::MembershipView view_;
  std::atomic<int> scheduler_heartbeat_ms_{0};
};

// The remote half of a partition's reads.
struct PeerFetchResult {
  Status status;
  std::vector<std::string> records;  // one per requested id, in order
  // With a DataLoss status: requested ids whose record failed its check
  // on the serving peer (Error.bad_samples; only ids this request named).
  std::vector<uint64_t> bad_samples;
  double ms = 0;  // time until this peer's last reply
  int64_t bytes = 0;
};

class PeerClient {
 public:
  virtual ~PeerClient() = default;
  // Fetches every group concurrently; one result per peer node.
  virtual std::map<int32_t, PeerFetchResult> FetchAll(
      uint64_t partition_id, int32_t requester,
      const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer) = 0;
  // The same, the groups of `decoded_peers` asked for decoded
  // (FetchRequest.decoded with `epoch`): their records hold the model
  // input's uint8 levels. The default fetches the other groups with
  // FetchAll and fails the decoded ones (Unimplemented).
  virtual std::map<int32_t, PeerFetchResult> FetchAllDecoded(
      uint64_t partition_id, int32_t requester, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer,
      const std::vector<int32_t>& decoded_peers, int64_t epoch);
};

// The spot check of decoded samples (README "Decoded serving"): sample
// `id` of `epoch` is also fetched as its record and preprocessed by the
// trainer when SplitMix64(salt, seed, epoch, id) % every == 0 (every ≥ 1;
// 1 = all). `salt` is the trainer's own secret (random per process), so a
// holder that knows the job's seed cannot tell which samples are checked.
// Probation: the first `probation` decoded samples a holder serves this
// trainer are all checked, so a holder that forges from its first reply is
// caught for certain, not with probability 1 - (1 - 1/every)^n; one that
// forges later is caught at the sampled rate.
struct SpotCheck {
  uint64_t seed = 0;  // training.seed
  uint64_t salt = 0;
  int every = 32;
  int64_t probation = 64;
  bool Checks(int64_t epoch, uint64_t id) const;
  // Whether the sample a holder serves after `served_before` decoded ones
  // (to this trainer) is checked: probation, then Checks.
  bool Checks(int64_t epoch, uint64_t id, int64_t served_before) const {
    return served_before < probation || Checks(epoch, id);
  }
};

struct ReadPartition {
  v1::Partition partition;
  // Samples that arrived decoded (their payload is the model input's levels).
  std::unordered_set<uint64_t> decoded;
  Status status;                        // not OK: the partition failed while reading
  std::map<int32_t, int64_t> poisoned;  // peer -> samples refused by the manifest
  std::vector<uint64_t> bad_samples;    // records that failed their check (PartitionFailed.bad_samples)
  Batch batch;
  v1::PartitionTimings timings;
};

class PartitionRunner {
 public:
  // `guard` (may be null) supplies the manifest peer samples are checked against.
  PartitionRunner(Clock* clock, cache::SampleCache* cache, PeerClient* peers, AgentMetrics* metrics,
                  const SampleGuard* guard = nullptr);
  ~PartitionRunner();
  PartitionRunner(const PartitionRunner&) = delete;
  PartitionRunner& operator=(const PartitionRunner&) = delete;
  // The clock its reads and emulated delays use (the pipeline times with it too).
  Clock* clock() const { return clock_; }
  // Local reads and peer fetches (concurrently); verifies every record
  // (CRC, sample id) and every peer sample against the manifest; then,
  // with a preprocessing pool, runs the stage (below) on the batch.
  ReadPartition Read(const v1::Partition& p, int32_t me);
  // Computes (if the read succeeded) and returns PartitionDone or
  // PartitionFailed.
  v1::Envelope Finish(ReadPartition read, Trainer* trainer, int32_t me);

  // Disk emulation (AgentConfig::disk_emulation): a partition's local read
  // of l samples lasts at least l·ms_per_sample (the spec's l·s/disk, the
  // cost model's Tl): the read's own time counts, the rest is slept, and a
  // read slower than that is not shortened. 0 = off (a real disk).
  void EmulateDisk(double ms_per_sample) { disk_ms_per_sample_ = ms_per_sample; }
  // The same with records of varying size (dataset.encoding jpeg): the read
  // lasts at least the local payload bytes read x ms_per_byte (the records'
  // real sizes, not dataset.sample_bytes, which is the decoded input's).
  void EmulateDiskPerByte(double ms_per_byte) { disk_ms_per_byte_ = ms_per_byte; }

  // The preprocessing stage (dataset.encoding jpeg, or an augment; null =
  // none, the payloads are the model's input bytes). Borrowed, must outlive
  // the runner. Read then ends by decoding every sample of a read batch
  // through the pool into Batch::inputs, seeded by the partition's epoch
  // and the sample id. It runs on the reader thread (PartitionPipeline),
  // after the fetch and before the batch is queued for compute, so one
  // partition's decode overlaps the previous one's compute, and a payload
  // that does not decode fails the partition while reading, like a corrupt
  // record: its id in bad_samples, the status DataLoss naming it, the
  // trainer skipping the round (Finish). The other samples are unaffected.
  void SetPreprocess(preprocess::PreprocessPool* pool) { preprocess_ = pool; }
  // Decoded samples (Partition.decoded_from; README "Decoded serving"): the
  // holders in decoded_from are asked for the model input (FetchRequest.decoded),
  // which Read uses as it is; the samples SpotCheck picks are then fetched
  // once more as their records (after the decoded replies, so a holder
  // commits before it learns which are checked), checked against the
  // manifest, preprocessed here and compared byte for byte with what the
  // holder sent. A mismatch reports the holder for poisoning (ReadPartition
  // .poisoned, PartitionFailed.poisoned_by) and fails the partition; the
  // sample is not used. Needs the preprocessing pool.
  void SetSpotCheck(const SpotCheck& check) { spot_check_ = check; }
  const SpotCheck& spot_check() const { return spot_check_; }

 private:
  Clock* clock_;
  cache::SampleCache* cache_;
  PeerClient* peers_;
  AgentMetrics* metrics_;
  const SampleGuard* guard_;
  // Runs the preprocessing stage on a read batch (see SetPreprocess).
  void Preprocess(ReadPartition& out);
  // What the fetch thread returns: the partition's fetch, then the spot
  // check's records (spot_ids per decoded peer).
  struct Fetched {
    std::map<int32_t, PeerFetchResult> results;
    std::map<int32_t, std::vector<uint64_t>> spot_ids;
    std::map<int32_t, PeerFetchResult> spot;
    std::map<int32_t, int64_t> decoded_received;  // per holder that replied
  };
  // Read's remote half: verifies each peer's records (decoded ones by CRC
  // and id only) into `got`; spot-checks the decoded ones (VerifySpotChecks).
  void TakeRemote(const std::map<int32_t, std::vector<uint64_t>>& remote, Fetched& f,
                  const cache::Manifest* manifest, std::unordered_map<uint64_t, cache::Sample>& got,
                  ReadPartition& out, Status& first_error);
  // One sample refused from `peer` (a forgery): counted in out.poisoned
  // and the poisoned-samples metric.
  void CountPoisoned(ReadPartition& out, int32_t peer);
  // Compares each spot-checked decoded sample with its record preprocessed here.
  void VerifySpotChecks(Fetched& f, const cache::Manifest* manifest,
                        std::unordered_map<uint64_t, cache::Sample>& got, ReadPartition& out,
                        Status& first_error);
  SpotCheck spot_check_;
  // Decoded samples each holder has served this trainer (SpotCheck probation).
  std::mutex decoded_mu_;
  std::map<int32_t, int64_t> decoded_served_by_;

  // Exchange windows (Finish of a round-ending step: its compute and the
  // exchange after it), counted at both edges: odd while one runs. Read
  // compares the count at its start and end to set
  // PartitionTimings.read_during_exchange.
  std::atomic<uint64_t> exchange_edges_{0};

  double disk_ms_per_sample_ = 0;
  double disk_ms_per_byte_ = 0;
  preprocess::PreprocessPool* preprocess_ = nullptr;
  ExactSleep disk_sleep_{clock_};  // the reader thread's (Read runs on one thread)
  // One thread that runs a Read's peer fetches while the reader reads the
  // local samples. A thread started per partition (std::async) cost a
  // clone and an exit per remote read.
  std::unique_ptr<boost::asio::thread_pool> fetch_thread_;
};

}  // namespace loft::agent
