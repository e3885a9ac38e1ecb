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

}  // namespace loft::fuzz
