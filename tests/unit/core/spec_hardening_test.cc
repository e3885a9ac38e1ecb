// Spec and files: node names that are not
// safe file names, names that collide with key files, min_batch x nodes
// overflow, and a dataset too large for the in-memory tables.
#include <catch2/catch.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "core/placement.h"

using namespace loft;

namespace {

std::string Spec(const std::string& name, const std::string& training = "{global_batch: 64, min_batch: 1}",
                 const std::string& samples = "1000", int count = 1) {
  return "dataset: {samples: " + samples + "}\ntraining: " + training +
         "\nnodes:\n"
         "  - {name: '" +
         name + "', count: " + std::to_string(count) +
         ", compute: {fixed_ms: 1, per_sample_ms: 0.1}, disk: {read_mbps: 100},"
         " link: {up_mbps: 10, down_mbps: 10, latency_ms: 1}}\n"
         "  - {name: other, compute: {fixed_ms: 1, per_sample_ms: 0.1}, disk: {read_mbps: 100},"
         " link: {up_mbps: 10, down_mbps: 10, latency_ms: 1}}\n";
}

std::string Error(const std::string& yaml) {
  auto spec = ParseClusterSpec(yaml, "c.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == StatusCode::kInvalidArgument);
  return spec.status().message();
}

}  // namespace

TEST_CASE("Node names '.', '..' and hidden names are refused (they become directory names)") {
  for (const std::string name : {".", "..", ".hidden", "-x", "_x"}) {
    INFO(name);
    const std::string msg = Error(Spec(name));
    CHECK(msg.find("c.yaml:") != std::string::npos);
    CHECK(msg.find("nodes[0].name must start with a letter or digit (got '" + name + "')") !=
          std::string::npos);
  }
  CHECK(ParseClusterSpec(Spec("a.b_c-1")).ok());
  CHECK(ParseClusterSpec(Spec("9lives")).ok());
}

TEST_CASE("Node names 'scheduler' and 'loftctl' are refused (keys_dir/<name>.key collides)") {
  CHECK(Error(Spec("scheduler")).find("'scheduler' is reserved (keys_dir/scheduler.key is the scheduler's") !=
        std::string::npos);
  CHECK(Error(Spec("loftctl")).find("'loftctl' is reserved (keys_dir/loftctl.key is the operator's") !=
        std::string::npos);
  // count expansion never produces them, and look-alikes are fine.
  CHECK(ParseClusterSpec(Spec("scheduler", "{global_batch: 64, min_batch: 1}", "1000", 2)).ok());
  CHECK(ParseClusterSpec(Spec("schedulers")).ok());
}

TEST_CASE("min_batch x nodes cannot overflow past the global batch check") {
  // 2^62 x 4 nodes wraps to 0 in 64-bit arithmetic.
  const std::string msg = Error(Spec("a", "{global_batch: 64, min_batch: 4611686018427387904}", "1000", 3));
  CHECK(msg.find("training.min_batch times the number of nodes (4611686018427387904 x 4) exceeds "
                 "training.global_batch (64)") != std::string::npos);
  // Exact boundary still accepted: 16 x 4 = 64.
  CHECK(ParseClusterSpec(Spec("a", "{global_batch: 64, min_batch: 16}", "1000", 3)).ok());
  CHECK_FALSE(ParseClusterSpec(Spec("a", "{global_batch: 64, min_batch: 17}", "1000", 3)).ok());
}

TEST_CASE("Huge max_batch values load (capped at global_batch, the capacity sum saturates)") {
  std::string yaml = Spec("a", "{global_batch: 64, min_batch: 1}", "1000", 3);
  const std::string big = "max_batch: 9223372036854775807, ";
  size_t at = 0;
  while ((at = yaml.find("compute:", at)) != std::string::npos) {
    yaml.insert(at, big);
    at += big.size() + 8;
  }
  auto spec = ParseClusterSpec(yaml, "c.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->MaxBatch(0) == 64);
  CHECK(spec->nodes[0].max_batch == INT64_MAX);
}

TEST_CASE("A huge dataset.samples is a clear error, not an uncaught bad_alloc") {
  const std::string msg = Error(Spec("a", "{global_batch: 64, min_batch: 1}", "1000000000000"));
  CHECK(msg.find("dataset.samples must be <= 1000000000") != std::string::npos);
  CHECK(msg.find("got 1000000000000") != std::string::npos);
  CHECK(ParseClusterSpec(Spec("a", "{global_batch: 64, min_batch: 1}", "1000000000")).ok());
  // The placement reports tables that cannot be allocated instead of throwing.
  auto p = Placement::Make(int64_t{1} << 61, {1.0, 1.0}, 2, 1);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kResourceExhausted);
  CHECK(p.status().message().find("do not fit in memory") != std::string::npos);
}
