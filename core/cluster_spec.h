// ClusterSpec: the one YAML cluster description that drives both the
// simulator (`loft-sim run`) and real processes (`loftctl cluster run`).
// Format and units: ../DESIGN.md "One cluster spec, two engines" and
// docs/cluster-spec.md. Every `_mbps` is megabits/s (1e6 bit/s), `_ms`
// milliseconds, `_s` seconds.
//
// The loader expands `count: k` into k nodes named `<name>-0 … <name>-(k-1)`
// (a node without count, or count: 1, keeps its name) and validates every
// field; errors name the file, line and field, e.g.
//   cluster.yaml:14: nodes[2].link.up_mbps must be > 0
// This struct is plain data; it does no I/O once loaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loft {

// Largest dataset.samples a spec may name (per-sample tables live in memory).
inline constexpr int64_t kMaxDatasetSamples = 1'000'000'000;
// training.byzantine_tolerance's upper bound: the verified ring's
// (models/ring_allreduce.h AllReduceOptions::tolerance).
inline constexpr int kMaxByzantineTolerance = 31;

// dataset.encoding: how a cache record stores a sample's image.
//   raw   the image's pixel bytes as the dataset holds them (784 for
//         Fashion-MNIST); every record's payload is sample_bytes long.
//   jpeg  the image resized to image_size x image_size and JPEG-encoded
//         (libjpeg-turbo, greyscale, jpeg_quality): payload sizes vary per
//         image; preprocess/ decodes it back to the model's input.
enum class DatasetEncoding { kRaw, kJpeg };
// dataset.augment: what the preprocessing stage does to a decoded image
// before it reaches the model, seeded by (job seed, epoch, sample id).
//   none       nothing
//   crop_flip  a random crop of the image padded by 4 pixels (at 28x28
//              scale) and a horizontal flip with probability 1/2
enum class AugmentKind { kNone, kCropFlip };
// dataset.decode_placement: where a remote JPEG sample is decoded.
//   trainer  always by the worker that trains on it (the default)
//   auto     the planner chooses per (holder, trainer) pair; a decoded
//            sample travels as the model input's sample_bytes uint8 levels
//            (DecodedWireBytes; scheduler/README-planning.md "Decode
//            placement"). The holder preprocesses it for the trainer
//            (edge_agent/README.md "Decoded serving"); the trainer spot-checks
//            a fraction of them against the encoded record.
enum class DecodePlacementKind { kTrainer, kAuto };

struct DatasetSpec {
  std::string name = "fashion-mnist";
  int64_t samples = 60000;
  // raw: the bytes of one stored image (a record's payload).
  // jpeg: the bytes of one decoded model input (rows x cols, 784 for
  // Fashion-MNIST), not a stored record's size (records vary per image;
  // `loftctl cache stat` reports their distribution). The planner's and
  // loft-sim's priors still use it as the bytes a sample moves.
  int64_t sample_bytes = 784;
  DatasetEncoding encoding = DatasetEncoding::kRaw;
  // jpeg only (a raw spec must not set them): the stored image's side in
  // pixels, in [28, 1024], and libjpeg-turbo's quality, in [1, 100].
  int image_size = 96;
  int jpeg_quality = 90;
  AugmentKind augment = AugmentKind::kNone;
  // jpeg only: the mean bytes of a stored record (`loftctl cache stat`'s
  // record_bytes mean), what the planner's priors charge per sample read or
  // moved; 0 = not set: 0.19·image_size² (sched::EstimatedJpegRecordBytes).
  double record_bytes = 0;
  DecodePlacementKind decode_placement = DecodePlacementKind::kTrainer;
};

// The bytes a sample is read and moved as, s (the planner's priors and
// loft-sim): dataset.sample_bytes with encoding raw; with jpeg
// dataset.record_bytes (the mean stored record, `loftctl cache stat`'s
// record_bytes mean), or when unset EstimatedJpegRecordBytes(image_size).
double SampleWireBytes(const DatasetSpec& d);
// 0.19·image_size² (measured: 1,699 bytes mean at 96 px, quality 90, on
// Fashion-MNIST; docs/cluster-spec.md "Encoded datasets").
double EstimatedJpegRecordBytes(int image_size);
// A decoded sample on the wire (dataset.decode_placement auto): the model
// input as uint8 levels, sample_bytes (784 for Fashion-MNIST): the holder
// runs the whole preprocessing stage (decode, augment with the trainer's
// (seed, epoch, id), resize; preprocess/preprocessor.h "quantise") and the
// trainer uses the bytes as they are. Smaller than a stored JPEG record
// (1,699 bytes mean at 96 px, quality 90), so ρ < 1.
double DecodedWireBytes(const DatasetSpec& d);

std::string_view DatasetEncodingName(DatasetEncoding e);
std::string_view AugmentKindName(AugmentKind a);
// Bounds of dataset.image_size and dataset.jpeg_quality.
inline constexpr int kMinImageSize = 28;
inline constexpr int kMaxImageSize = 1024;

enum class PlacementKind { kShards, kZipf, kExplicit };

struct PlacementSpec {
  PlacementKind kind = PlacementKind::kShards;
  int replication = 1;
  double skew = 0.0;           // zipf exponent (kind zipf)
  std::vector<double> shares;  // one per expanded node (kind explicit)
  uint64_t seed = 0;           // placement hash seed; defaults to training.seed
};

struct TrainingSpec {
  int64_t global_batch = 512;
  int64_t min_batch = 8;
  int64_t iterations = 300;
  bool overlap = true;
  uint64_t seed = 7;
  std::string model =
      "none";  // none | softmax | mlp | external (the consumer's model, compute_mode external)
  std::string aggregation = "mean";  // mean | weighted_mean | median | trimmed_mean | krum | centered_clip
  double learning_rate = 0.05;
  double momentum = 0.9;
  // training.lr_schedule (models::SgdOptions): the learning rate of update
  // t. Default constant (= learning_rate every step).
  struct LrSchedule {
    std::string kind = "constant";  // constant | step | cosine
    int64_t step_every = 1000;      // step: lr * gamma^floor(t / step_every)
    double gamma = 0.1;             // step: decay factor, in (0, 1]
    int64_t total_steps = 0;        // cosine: schedule length; 0 = training.iterations
    double min_learning_rate = 0;   // cosine floor, in [0, learning_rate]
    int64_t warmup_steps = 0;       // any kind: linear warm-up over the first steps
  } lr_schedule;
  // f: Byzantine members the ring tolerates (models/ring_allreduce.h): each
  // reduced chunk is computed by f+1 members (2f+1 when they disagree) and
  // taken when f+1 agree bitwise; a weight-0 join needs f+1 announcers. 0 =
  // trusted cluster (the plain ring, which trusts each chunk's owner). In
  // [0, 31]; needs at least 2f+1 nodes. When the spec leaves it out, the
  // parser resolves it: 1 with a robust aggregation (RobustAggregation) on
  // 3 or more nodes, else 0, so every reader (agents, scheduler, loft-sim,
  // calibrate, libloft) sees the same resolved value.
  int byzantine_tolerance = 0;
  // True when the spec set byzantine_tolerance itself (false: resolved as
  // above).
  bool byzantine_tolerance_set = false;
  // training.allreduce: the ring all-reduce's cost in loft-sim
  // (sim/allreduce_model.h, docs/cluster-spec.md). Only used when model
  // != none; every field has a prior from the model when absent.
  struct Allreduce {
    int64_t parameters = 0;             // 0 = the agent's model on dataset.sample_bytes inputs
    double step_latency_ms = -1;        // per ring step; < 0 = the members' largest link.latency_ms
    double reduce_ns_per_element = -1;  // reducer cost; < 0 = prior by aggregation
    double fixed_ms = 0;                // per all-reduce, >= 0
    bool links = true;                  // false: transfers are not limited by the spec's link rates
  } allreduce;
  // training.exchange: how often and in what form the members combine
  // their work (docs/cluster-spec.md "training.exchange"). The default
  // (period 1, no compression, no overlap) all-reduces every step's
  // gradient, as loft always did. Only used when model != none.
  struct Exchange {
    // Local SGD steps per exchange (a round). 1: every planned step's
    // gradient is all-reduced. N > 1: each member takes N local steps
    // (each on a partition the planner balanced), then the members
    // all-reduce their model deltas. training.iterations still counts
    // steps (global batches).
    int64_t period = 1;
    // period: auto: the scheduler picks each round's period
    // (scheduler/exchange_plan.h); period is then the first round's.
    bool period_auto = false;
    int64_t max_period = 16;  // auto: the largest period it picks, >= 1
    // auto: c, what a local step loses to the members' drift per step of
    // period: a step of a round of period tau is taken to be worth
    // 1 / (1 + c*tau) of a synchronous one, so auto's loss-free period is
    // ceil(sqrt(X / (c*S))) (scheduler/exchange_plan.h). In (0, 100].
    double drift = 0.0625;
    std::string compression = "none";  // none | int8 (per-chunk scale + int8, error feedback)
    // The next round's reads run while the exchange runs (they share the
    // links); false: a member reads nothing during its exchange.
    bool overlap = false;
    bool is_default() const { return period == 1 && !period_auto && compression == "none" && !overlap; }
  } exchange;
  // training.eval: what a test-set evaluation costs in loft-sim. A real
  // run evaluates on one member (the ring's first reporter) after the
  // exchange of every `--eval-every` steps and after the last, before
  // that member's next step; loft-sim charges that member
  // test_samples · relative_cost · its compute.per_sample_ms then (only
  // when loft-sim is given --eval-every, and model != none).
  // `loftctl calibrate` fits relative_cost from a run's evaluated steps.
  struct Eval {
    int64_t test_samples = 10000;      // Fashion-MNIST's test set
    double relative_cost = 1.0 / 3.0;  // a test sample's forward pass per training sample's step
  } eval;
};

// Parameters of the agent's built-in `model` on inputs of `input_dim`
// bytes (10 classes: models::ModelSpec's defaults); 0 for none/external.
int64_t ModelParameterCount(const std::string& model, int64_t input_dim);

// The hand-off's default (SchedulerSpec::handoff_ms), measured on the
// 2-core development machine's testbed (docs/testbed.md "Control-path
// hand-off"; the figure and how to re-measure it are in cluster_spec.cc).
double DefaultHandoffMs();

// scheduler: per-iteration costs of the real scheduler loft-sim charges.
struct SchedulerSpec {
  double overhead_ms = 0;  // added to every iteration's makespan (plan, stream, acks), >= 0
  // Failure detection as the daemon decides it (scheduler/liveness.h): a
  // node is declared dead when it has been silent (no heartbeat, ack or
  // grant) for more than heartbeat_timeout_ms; agents beat every
  // heartbeat_interval_ms. Defaults: `loftctl cluster run`'s. 0 = the
  // death is noticed at once.
  double heartbeat_interval_ms = 250;  // > 0
  double heartbeat_timeout_ms = 1500;  // >= 0
  // The control path outside the daemon's own time (overhead_ms): an
  // agent's report reaching the scheduler, the assignment it sends reaching
  // the agent and the agent's reader thread waking up to it. loft-sim makes
  // an assignment readable at its agent handoff_ms after the daemon sends
  // it. >= 0. Default: measured on the testbed (docs/testbed.md
  // "Control-path hand-off"); `loftctl calibrate` fits it from a run.
  double handoff_ms = DefaultHandoffMs();
  // How long planning waits for a crashed holder (scheduler/holder_wait.h):
  // once every unconsumed sample of the epoch is held only by dead nodes
  // and the last of them died holder_wait_s ago, those samples are left
  // out of the epoch (unavailable for it; they come back with their holder
  // in a later epoch) and training goes on. An evicted node never comes
  // back: its samples are left out at once. >= 0; 0 = no wait.
  double holder_wait_s = 300;
  // Partition timeouts, one value for every engine (scheduler/
  // partition_timeouts.h; the daemon's and loftctl's 0 take this one): a
  // partition not acked by its plan's time + max(this, 5 × predicted)
  // times out. Default 30000; the parser's default is 60000 when
  // training.model is not "none" (cluster_spec.cc). >= 0; 0 = never.
  double partition_timeout_ms = 30000;
};

// network: what the links carry besides the samples' payload, as loft-sim
// charges it (docs/cluster-spec.md "Transport overhead and hand-off").
// Neither changes planning: the cost models' priors stay sample_bytes /
// link rate (DESIGN.md "Planning"). Defaults: this project's transport
// (TCP/IPv4 over Ethernet, ZeroMQ with CURVE), derived from its framing.
struct NetworkSpec {
  // Payload bytes per link byte of a TCP stream: 1448 bytes of segment
  // payload (MSS with timestamps) per 1514-byte Ethernet frame. (0, 1].
  double packet_efficiency = 1448.0 / 1514.0;
  // Link bytes per sample fetched from a peer beyond sample_bytes: the
  // cache record's header and label (20) and one ZeroMQ frame under CURVE
  // (9 frame header + 8 "MESSAGE" + 8 nonce + 1 flags + 16 MAC). >= 0.
  double record_overhead_bytes = 62;
  // Every link is a token bucket of LinkBurstBytes (below): after a pause
  // that many bytes pass at once, the rest at the rate (sim/flow_network.h).
  // Both 0 = fluid links. >= 0.
  double burst_ms = 2;
  double burst_min_bytes = 16384;
  // Each request to a peer costs this much beyond the link's latency and
  // transfer: the request's trip, the peer's poll loop and cache read,
  // the reply's framing and the reader's wake-up. loft-sim adds it once
  // per serving peer of a partition's remote read. Default 0 (DESIGN.md's
  // links); on this project's testbed, with 6-8 agents sharing two cores,
  // it measured 0.9-1.4 ms (docs/cluster-spec.md). `loftctl calibrate`
  // folds it into fitted link latencies and writes 0. >= 0.
  double request_overhead_ms = 0;
  // The small packets loft-sim puts on the links besides records and ring
  // chunks (docs/cluster-spec.md "Transport overhead and hand-off in
  // loft-sim", measured with tcpdump on the testbed). They take link capacity; nothing waits
  // for them (on the testbed they leave first, docs/testbed.md "Priority
  // for requests"). All 0 = links carry only records and ring chunks.
  // TCP ACKs: link bytes a receiver sends back per payload byte it
  // receives (delayed ACKs of 66 bytes per 2-3 segments). >= 0.
  double ack_bytes_per_byte = 0.017;
  // One FetchRequest to a serving peer (reader's uplink, server's
  // downlink), link bytes. >= 0.
  double request_bytes = 130;
  // Per partition, the worker's PartitionDone and CreditGrant to the
  // scheduler with their TCP ACKs (worker's uplink), link bytes. >= 0.
  double report_bytes = 400;
  // Per partition, the scheduler's PartitionAssignment and ServeGrants
  // with their TCP ACKs (worker's downlink), link bytes. >= 0.
  double assignment_bytes = 300;
};

// The token-bucket depth of a link of `mbps` megabits/s, in link bytes:
// max(burst_min_bytes, burst_ms of the rate). The one burst rule of
// loft-sim's links (sim/cluster_model.cc), the testbed's tbf qdiscs
// (tools/loftctl/testbed_plan.cc, rounded up to whole bytes) and the
// agents' link emulation (edge_agent/link_emulator.h MakeLinkBucket).
double LinkBurstBytes(const NetworkSpec& network, double mbps);

// agent: the agent daemon's own CPU, which loft-sim charges against a
// node's compute.cpu_cores (the testbed's CFS quota; sim/cpu_quota.h).
// Nodes without a quota are not charged: their compute and disk priors
// are an edge node's own. Defaults: measured on this project's testbed
// (docs/cluster-spec.md "The agents' CPU in loft-sim"), 6-8 agents on two shared
// cores. All >= 0; all 0 = the agents' CPU is free.
struct AgentSpec {
  // Per partition: its assignment, the reader and compute threads'
  // hand-offs, the report and the credit.
  double cpu_ms_per_partition = 0.23;
  // Per sample read (local or from a peer) and per sample served to a peer.
  double cpu_ms_per_sample = 0.0023;
  // Per request served to a peer (one per serving peer of a partition).
  double cpu_ms_per_request = 0.1;
  // Per sample read from a peer, on the reader, on top of
  // cpu_ms_per_sample: receiving, decrypting and checking the record
  // (docs/cluster-spec.md "The agents' CPU in loft-sim").
  double cpu_ms_per_fetched_sample = 0.0097;
  // Per MB (10^6 bytes) a member sends or receives in the all-reduce
  // (TCP, CURVE, framing), on each end: a ring step costs a member
  // 2·chunk bytes' worth, run through its quota alongside the step's
  // transfers (docs/cluster-spec.md "The agents' CPU in loft-sim").
  double cpu_ms_per_allreduce_mb = 6.0;
  // Cores the agent uses whatever it does (its poll loops, heartbeats,
  // ZeroMQ I/O threads): taken off the quota's rate and burst.
  double idle_cores = 0.008;
};

// The CFS period of a node's quota on the testbed: 10 ms, so that a
// throttled agent waits at most 10·(1 − cpu_cores) ms, not the 100 ms of
// the kernel's default period (a 0.15-core agent stalled 85 ms in a 5 ms
// iteration); longer only when cpu_cores < 0.1 (the kernel's smallest
// quota is 1 ms per period; its largest period 1 s).
// tools/loftctl/testbed_plan.cc writes it;
// loft-sim's quota (sim/cpu_quota.h) holds one period's quota as a burst.
inline constexpr int64_t kCfsPeriodUs = 10000;
int64_t CfsPeriodUs(double cpu_cores);

// How a compute time's jitter factor is drawn (JitterFactor).
enum class JitterKind { kNormal, kLognormal };

struct ComputeSpec {
  double fixed_ms = 1.0;
  double per_sample_ms = 0.05;
  double jitter = 0.0;  // relative std-dev of compute time, >= 0
  // Testbed only (`loftctl cluster run --testbed`): the agent's CPU quota in
  // cores (a cgroup cfs quota). 0 = not set: no quota. loft-sim charges the
  // agent's own CPU (AgentSpec) against it; compute itself is emulated (a
  // sleep) and is not charged.
  double cpu_cores = 0.0;
  // compute.jitter_kind: normal (the default) or lognormal (what `loftctl
  // calibrate` writes: agents sharing cores are never much faster than
  // their law, often much slower).
  JitterKind jitter_kind = JitterKind::kNormal;
  // compute.jitter_shared, in [0, 1]: the share of the jitter's variance
  // (of z) common to every node in the same step: loft-sim draws
  // z = √ρ·z_step + √(1−ρ)·z_node, z_step one draw per step for all nodes
  // (agents sharing a host are slow together). 0: independent (the
  // default). loft-sim only; `loftctl calibrate` fits it.
  double jitter_shared = 0.0;
};

// The factor a compute time is multiplied by, from a standard normal draw
// z: kNormal max(0.05, 1 + jitter·z); kLognormal exp(s·z − s²/2) with
// s² = ln(1 + jitter²), mean 1 and relative std-dev `jitter`, always > 0,
// its left tail short (a draw 2σ fast is 0.26× the mean at jitter 0.64,
// where the normal is clipped at 0.05). 1 when jitter is 0. The one jitter
// rule of loft-sim (sim/cluster_model.cc) and the synthetic agents
// (edge_agent/trainer.cc).
double JitterFactor(double jitter, JitterKind kind, double z);
std::string_view JitterKindName(JitterKind kind);

struct SlowdownSpec {
  double at_s = 0;
  double factor = 1.0;  // compute time multiplier, > 0
  double for_s = 0;
};

struct DiskSpec {
  double read_mbps = 800;
};

// nodes[].decode: the node's preprocessing (decode) cost of one JPEG
// sample of k KB, per_sample_ms + per_kb_ms·k, on one full core (a node
// with compute.cpu_cores < 1 takes 1/cpu_cores as long). Defaults:
// preprocess_bench's stage at 96 px, quality 90 (38,600 images/s a core,
// 0.026 ms a 1.68 KB image; the split between the two terms is assumed).
// Used only with dataset.encoding: jpeg.
struct DecodeSpec {
  double per_sample_ms = 0.008;
  double per_kb_ms = 0.011;
};

struct LinkSpec {
  double up_mbps = 100;
  double down_mbps = 100;
  double latency_ms = 1;
};

struct FailureSpec {
  double at_s = 0;
  double down_s = 0;
};

// How a Byzantine node of the spec attacks (models/README.md
// "Byzantine members"): gradients (sign_flip, random, nan), its reduced
// chunk of the ring's all-gather (chunk_garbage, chunk_scale), or the
// ring protocol (phantom_round: announces rounds the scheduler has not
// planned, with only its own weight, and claims a huge last_round), or the
// samples it serves to peers (poison_serve: label-flipped records with
// correct CRCs; refused by the dataset manifest, cache/manifest.h;
// poison_decoded: honest records but forged decoded samples, the levels
// inverted, when it decodes for a peer (dataset.decode_placement auto;
// caught by the trainer's spot check, edge_agent/README.md "Decoded
// serving")).
enum class ByzantineKind {
  kNone,
  kSignFlip,
  kRandom,
  kNaN,
  kChunkGarbage,
  kChunkScale,
  kPhantomRound,
  kPoisonServe,
  kPoisonDecoded
};

struct NodeSpec {
  std::string name;   // expanded name, unique
  std::string group;  // the spec entry's name before expansion
  ComputeSpec compute;
  std::vector<SlowdownSpec> slowdowns;
  DiskSpec disk;
  LinkSpec link;
  DecodeSpec decode;
  int64_t max_batch = 0;  // 0 = no limit beyond global_batch
  std::vector<FailureSpec> failures;
  ByzantineKind byzantine = ByzantineKind::kNone;
  double byzantine_scale = 1.0;
  int line = 0;  // source line of the node's spec entry (for messages)
};

struct ClusterSpec {
  std::string source;  // file name (or "<string>") for messages
  DatasetSpec dataset;
  PlacementSpec placement;
  TrainingSpec training;
  SchedulerSpec scheduler;
  NetworkSpec network;
  AgentSpec agent;
  std::vector<NodeSpec> nodes;  // expanded, in spec order

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  // Index of the node with this expanded name, or -1.
  int FindNode(const std::string& name) const;
  // Effective maximum batch of node i (max_batch, or global_batch if 0).
  int64_t MaxBatch(int i) const;
};

// True for the aggregation rules that bound a Byzantine member's gradient
// (median, trimmed_mean, krum, centered_clip); false for mean and
// weighted_mean.
bool RobustAggregation(const std::string& aggregation);

// What a spec leaves unprotected that its reader should be told about (one
// message per line, empty when nothing): a robust aggregation with an
// explicit training.byzantine_tolerance of 0, or on fewer than 3 nodes,
// runs the plain ring, whose chunk owners are trusted. The scheduler daemon
// logs these at start, loft-sim prints them.
std::vector<std::string> SpecWarnings(const ClusterSpec& spec);

// Loads and validates. `source_name` is used in messages.
StatusOr<ClusterSpec> LoadClusterSpecFile(const std::string& path);
StatusOr<ClusterSpec> ParseClusterSpec(const std::string& yaml_text,
                                       const std::string& source_name = "<string>");

std::string_view PlacementKindName(PlacementKind k);
std::string_view ByzantineKindName(ByzantineKind k);

}  // namespace loft
