// Cluster specs fixed by fuzz targets and shared with make_seeds.cc, which
// writes their seeds (a snapshot restores only into a state of its spec).
#pragma once

namespace loft::fuzz {

// fuzz_state_restore: 2 nodes, 48 samples, 6 iterations of 12.
inline constexpr char kStateRestoreSpec[] =
    "dataset: {name: fashion-mnist, samples: 48, sample_bytes: 784}\n"
    "placement: {kind: shards, replication: 2}\n"
    "training: {global_batch: 12, min_batch: 2, iterations: 6, seed: 7}\n"
    "nodes:\n  - name: edge\n    count: 2\n";

// fuzz_calibrate: 3 nodes of two kinds, a failure, explicit placement.
inline constexpr char kCalibrateSpec[] =
    "dataset: {name: fashion-mnist, samples: 6000, sample_bytes: 784}\n"
    "placement: {kind: explicit, shares: [3, 1, 1], seed: 11}\n"
    "training: {global_batch: 256, min_batch: 8, iterations: 40, overlap: false}\n"
    "nodes:\n"
    "  - name: big\n"
    "    compute: {fixed_ms: 2, per_sample_ms: 0.05, jitter: 0.1}\n"
    "    disk: {read_mbps: 400}\n"
    "    link: {up_mbps: 40, down_mbps: 50, latency_ms: 5}\n"
    "    failures: [{at_s: 10, down_s: 2}]\n"
    "  - name: edge\n"
    "    count: 2\n"
    "    link: {up_mbps: 5, down_mbps: 10, latency_ms: 20}\n";

}  // namespace loft::fuzz
