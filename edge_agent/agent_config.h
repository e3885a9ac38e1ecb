// AgentConfig: every setting of loft-agent, as a plain struct with
// defaults, loaded from a flat YAML file (keys = field names) and then
// overridden by command-line flags (see main.cc and README.md).
//
// Not responsible for: reading the cluster spec or keys (the server does
// that at start-up).
// Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <string>

#include "core/codec.h"
#include "core/read_ahead.h"
#include "core/status.h"
#include "core/zmq_util.h"

namespace loft::agent {

struct AgentConfig {
  std::string node_name;                    // required; the node's expanded spec name
  std::string cluster_spec;                 // path to the cluster spec YAML (compute + link constants)
  std::string cache_dir;                    // required; the node's SampleCache directory
  std::string block_cache = "hyper_clock";  // the cache's RocksDB block cache: hyper_clock | lru
  // The dataset manifest file (cache/manifest.h, MANIFEST.loft; written by
  // `loftctl ingest`); empty = none. With it the agent registers with its
  // root and the scheduler sends the 16-byte-per-sample digests only when
  // its own manifest differs (960 KB at 60,000 samples otherwise, at every
  // registration, over the node's downlink).
  std::string manifest;
  // Refuse to start when the cache does not hold what the spec's placement
  // gives this node (cache_check.h). false: only for hand-made test caches.
  bool check_cache = true;
  std::string scheduler_endpoint;               // e.g. tcp://10.0.0.1:7400; empty = no scheduler (tests)
  std::string peer_bind = "tcp://127.0.0.1:0";  // ROUTER for peer fetch; port 0 = any free port
  std::string peer_advertise;       // endpoint peers connect to; empty = the resolved bind endpoint
  std::string consumer_endpoint;    // compute_mode external: ROUTER for the C API consumer
  int consumer_timeout_ms = 10000;  // external: deadline for a consumer + its report, per partition
  std::string consumer_token;  // external: a ConsumerHello must carry it (LOFT_CONSUMER_TOKEN); empty = none
  std::string keys_dir;        // CURVE keys; required unless insecure
  bool insecure = false;       // no CURVE; only with loopback endpoints
  // Partitions queued + running at once, >= 1 (core/read_ahead.h).
  int credits = kDefaultCredits;
  std::string compute_mode = "synthetic";  // synthetic (spend the spec's compute time) | external (consumer)
  bool link_emulation = false;             // emulate the spec's link rates with token buckets
  // With link_emulation: also the rates (token buckets). false = latency
  // only; the kernel shapes the rates (loftctl cluster run --testbed).
  bool link_rate_emulation = true;
  // Emulate the spec's disk: a partition's local read of l samples lasts
  // at least l·sample_bytes/disk.read_mbps (the read's own time included),
  // as loft-sim charges it. For emulated clusters (loftctl cluster run);
  // a real edge node reads its real disk (false).
  bool disk_emulation = false;
  // Prometheus HTTP port, as in loft-scheduler: 0 = off (default), 1..65535 =
  // that port. -1 (the old "off") is still accepted and also means off.
  int metrics_port = 0;
  std::string metrics_address = "127.0.0.1";
  std::string log_level = "info";
  int heartbeat_interval_ms = 500;
  int scheduler_timeout_ms = 5000;  // re-register after this long without a scheduler message
  int fetch_timeout_ms = 10000;     // give up a partition's peer fetch after this long
  int fetch_batch = 64;             // sample ids per FetchRequest
  // Threads of the preprocessing stage (preprocess/preprocess_pool.h:
  // decode, augment, resize, normalise) for dataset.encoding jpeg. 1..256.
  int preprocess_threads = 2;
  int64_t max_message_bytes = static_cast<int64_t>(kDefaultMaxMessageBytes);
  int max_grants = 4096;  // ServeGrant table bound (oldest evicted)
  // IP type of service (ZMQ_TOS) of the agent's request connections: to
  // serving peers (requests and the ACKs of their replies) and to the
  // scheduler. 16 = 0x10, low delay; 0 = unmarked. 0..255.
  int request_tos = kLowDelayTos;
  uint64_t seed = 1;  // compute jitter seed
  // Training (used when the spec's training.model is softmax|mlp; see README "Training").
  std::string ring_bind = "tcp://127.0.0.1:0";  // all-reduce ROUTER (plain TCP); port 0 = any free port
  std::string ring_advertise;                   // endpoint peers connect to; empty = resolved ring_bind
  std::string test_data_dir = "/usr/share/datasets/fashion-mnist";  // t10k-*.gz for evaluation
  int eval_every = 50;          // evaluate on the test set every N iterations; 0 = never
  int64_t last_iteration = -1;  // also evaluate after this iteration; -1 = none
  int ring_timeout_ms = 20000;  // one all-reduce attempt's deadline

  Status Validate() const;
};

// Loads a flat YAML map; unknown keys are errors naming the file and key.
StatusOr<AgentConfig> LoadAgentConfigFile(const std::string& path);
StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text, const std::string& source = "<string>");
// The YAML form of `c` (every key), which ParseAgentConfig reads back to the
// same struct; `loftctl cluster run` writes each agent-<node>.yaml so.
std::string AgentConfigToYaml(const AgentConfig& c);

}  // namespace loft::agent
