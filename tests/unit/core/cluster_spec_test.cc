#include "core/cluster_spec.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace loft;

static const char* kGood = R"(dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}
placement: {kind: shards, replication: 1, skew: 0.0}
training: {global_batch: 512, min_batch: 8, iterations: 300, overlap: true, seed: 7,
           model: mlp, aggregation: trimmed_mean}
nodes:
  - name: edge-a
    count: 4
    compute: {fixed_ms: 2.0, per_sample_ms: 0.05, jitter: 0.05}
    disk: {read_mbps: 800}
    link: {up_mbps: 100, down_mbps: 100, latency_ms: 5}
    max_batch: 512
    failures: [{at_s: 60, down_s: 20}]
    byzantine: none
  - name: edge-b
    compute: {fixed_ms: 1.0, per_sample_ms: 0.1}
    link: {up_mbps: 10, down_mbps: 20, latency_ms: 10}
)";

TEST_CASE("good spec loads with count expansion") {
  auto spec = ParseClusterSpec(kGood, "cluster.yaml");
  REQUIRE(spec.ok());
  REQUIRE(spec->num_nodes() == 5);
  CHECK(spec->nodes[0].name == "edge-a-0");
  CHECK(spec->nodes[3].name == "edge-a-3");
  CHECK(spec->nodes[4].name == "edge-b");
  CHECK(spec->nodes[0].group == "edge-a");
  CHECK(spec->nodes[2].link.up_mbps == 100);
  CHECK(spec->nodes[1].failures.size() == 1);
  CHECK(spec->nodes[4].link.down_mbps == 20);
  CHECK(spec->training.model == "mlp");
  CHECK(spec->training.aggregation == "trimmed_mean");
  CHECK(spec->training.overlap);
  CHECK(spec->dataset.sample_bytes == 784);
  CHECK(spec->FindNode("edge-b") == 4);
  CHECK(spec->FindNode("nope") == -1);
  CHECK(spec->MaxBatch(4) == 512);
  CHECK(spec->placement.seed == 7);
}

static std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  s.replace(pos, from.size(), to);
  return s;
}

TEST_CASE("bad specs name file, line and field") {
  SECTION("negative uplink") {
    auto spec = ParseClusterSpec(Replace(kGood, "up_mbps: 10,", "up_mbps: -1,"), "cluster.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() == "cluster.yaml:16: nodes[1].link.up_mbps must be > 0");
  }
  SECTION("unknown field") {
    auto spec = ParseClusterSpec(Replace(kGood, "disk: {read_mbps: 800}", "disk: {read_mb: 800}"), "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() ==
          "c.yaml:9: nodes[0].disk.read_mb is not a known field (expected one of: read_mbps)");
  }
  SECTION("bad byzantine kind") {
    auto spec = ParseClusterSpec(Replace(kGood, "byzantine: none", "byzantine: evil"), "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() ==
          "c.yaml:13: nodes[0].byzantine must be one of none, sign_flip, random, nan, chunk_garbage, "
          "chunk_scale, phantom_round, poison_serve, poison_decoded (got 'evil')");
  }
  SECTION("poison_serve") {
    auto spec = ParseClusterSpec(Replace(kGood, "byzantine: none", "byzantine: poison_serve"), "c.yaml");
    REQUIRE(spec.ok());
    CHECK(spec->nodes[0].byzantine == ByzantineKind::kPoisonServe);
    CHECK(ByzantineKindName(ByzantineKind::kPoisonServe) == "poison_serve");
  }
  SECTION("poison_decoded") {
    auto spec = ParseClusterSpec(Replace(kGood, "byzantine: none", "byzantine: poison_decoded"), "c.yaml");
    REQUIRE(spec.ok());
    CHECK(spec->nodes[0].byzantine == ByzantineKind::kPoisonDecoded);
    CHECK(ByzantineKindName(ByzantineKind::kPoisonDecoded) == "poison_decoded");
  }
  SECTION("non-number") {
    auto spec = ParseClusterSpec(Replace(kGood, "samples: 60000", "samples: lots"), "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() == "c.yaml:1: dataset.samples has an invalid value 'lots'");
  }
  SECTION("replication above node count") {
    auto spec = ParseClusterSpec(Replace(kGood, "replication: 1", "replication: 6"), "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() == "c.yaml:2: placement.replication must be <= the number of nodes (5)");
  }
  SECTION("explicit shares must match node count") {
    auto spec = ParseClusterSpec(
        Replace(kGood, "{kind: shards, replication: 1, skew: 0.0}", "{kind: explicit, shares: [1, 2]}"),
        "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() ==
          "c.yaml:2: placement.shares must list one share per node (5 nodes after count expansion, got 2)");
  }
  SECTION("syntax error") {
    auto spec = ParseClusterSpec("nodes: [\n  {name: a", "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message().rfind("c.yaml:", 0) == 0);
  }
  SECTION("missing nodes") {
    auto spec = ParseClusterSpec("dataset: {samples: 10}\n", "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() == "c.yaml:1: nodes is required");
  }
  SECTION("duplicate expanded names") {
    auto spec = ParseClusterSpec("nodes:\n  - {name: a, count: 2}\n  - {name: a-1}\n", "c.yaml");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message() == "c.yaml:3: nodes[1].name duplicates node name 'a-1'");
  }
}

TEST_CASE("missing file is NotFound") {
  auto spec = LoadClusterSpecFile("/nonexistent/cluster.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == StatusCode::kNotFound);
}

TEST_CASE("LinkBurstBytes is max(burst_min_bytes, burst_ms of the link's rate)") {
  const NetworkSpec defaults;
  CHECK(LinkBurstBytes(defaults, 10) == 16384);   // 2 ms of 10 Mbit/s = 2500: the floor
  CHECK(LinkBurstBytes(defaults, 100) == 25000);  // 2 ms of 12.5 MB/s
  NetworkSpec n;
  n.burst_ms = 10;
  n.burst_min_bytes = 0;
  CHECK(LinkBurstBytes(n, 10) == 12500);
  n.burst_ms = 0;
  CHECK(LinkBurstBytes(n, 100) == 0);  // fluid
}

TEST_CASE("compute.cpu_cores is optional, per node, and must be > 0") {
  auto plain = ParseClusterSpec(kGood, "cluster.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->nodes[0].compute.cpu_cores == 0.0);  // not set: no quota
  auto quota = ParseClusterSpec(Replace(kGood, "per_sample_ms: 0.1}", "per_sample_ms: 0.1, cpu_cores: 0.25}"),
                                "cluster.yaml");
  REQUIRE(quota.ok());
  CHECK(quota->nodes[4].compute.cpu_cores == 0.25);
  CHECK(quota->nodes[0].compute.cpu_cores == 0.0);
  auto bad = ParseClusterSpec(Replace(kGood, "per_sample_ms: 0.1}", "per_sample_ms: 0.1, cpu_cores: 0}"),
                              "cluster.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "cluster.yaml:15: nodes[1].compute.cpu_cores must be > 0");
}

TEST_CASE("compute.jitter_kind: normal by default, lognormal on request, anything else named") {
  auto plain = ParseClusterSpec(kGood, "cluster.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->nodes[0].compute.jitter_kind == JitterKind::kNormal);
  auto logn = ParseClusterSpec(
      Replace(kGood, "per_sample_ms: 0.1}", "per_sample_ms: 0.1, jitter_kind: lognormal}"), "cluster.yaml");
  REQUIRE(logn.ok());
  CHECK(logn->nodes[4].compute.jitter_kind == JitterKind::kLognormal);
  CHECK(logn->nodes[0].compute.jitter_kind == JitterKind::kNormal);
  auto bad = ParseClusterSpec(
      Replace(kGood, "per_sample_ms: 0.1}", "per_sample_ms: 0.1, jitter_kind: gamma}"), "cluster.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "cluster.yaml:15: nodes[1].compute.jitter_kind must be normal or lognormal (got 'gamma')");
}

TEST_CASE("JitterFactor: the normal clipped at 0.05, the lognormal of mean 1 and relative std-dev jitter") {
  CHECK(JitterFactor(0, JitterKind::kNormal, 3) == 1);
  CHECK(JitterFactor(0, JitterKind::kLognormal, 3) == 1);
  CHECK(JitterFactor(0.2, JitterKind::kNormal, 1) == Approx(1.2));
  CHECK(JitterFactor(0.2, JitterKind::kNormal, -10) == 0.05);
  const double s2 = std::log(1 + 0.64 * 0.64);
  CHECK(JitterFactor(0.64, JitterKind::kLognormal, 0) == Approx(std::exp(-s2 / 2)));
  CHECK(JitterFactor(0.64, JitterKind::kLognormal, -10) > 0);
  // Over a fine grid of standard normal quantiles: mean 1, std-dev 0.64.
  double sum = 0, sq = 0, weight = 0;
  for (double z = -8; z <= 8; z += 1e-3) {
    const double w = std::exp(-z * z / 2);
    const double f = JitterFactor(0.64, JitterKind::kLognormal, z);
    sum += w * f;
    sq += w * f * f;
    weight += w;
  }
  const double mean = sum / weight;
  CHECK(mean == Approx(1).epsilon(1e-6));
  CHECK(std::sqrt(sq / weight - mean * mean) == Approx(0.64).epsilon(1e-4));
  CHECK(JitterKindName(JitterKind::kLognormal) == "lognormal");
  CHECK(JitterKindName(JitterKind::kNormal) == "normal");
}

TEST_CASE("training.byzantine_tolerance: 1 with a robust rule, 0 with mean, explicit values kept") {
  // kGood: trimmed_mean on 5 nodes, tolerance left out: the verified ring.
  auto robust = ParseClusterSpec(kGood, "c.yaml");
  REQUIRE(robust.ok());
  CHECK(robust->training.byzantine_tolerance == 1);
  CHECK_FALSE(robust->training.byzantine_tolerance_set);
  CHECK(SpecWarnings(*robust).empty());
  for (const char* rule : {"median", "krum", "centered_clip"}) {
    auto r =
        ParseClusterSpec(Replace(kGood, "aggregation: trimmed_mean", std::string("aggregation: ") + rule));
    REQUIRE(r.ok());
    CHECK(r->training.byzantine_tolerance == 1);
  }
  for (const char* rule : {"mean", "weighted_mean"}) {
    auto r =
        ParseClusterSpec(Replace(kGood, "aggregation: trimmed_mean", std::string("aggregation: ") + rule));
    REQUIRE(r.ok());
    CHECK(r->training.byzantine_tolerance == 0);
    CHECK(SpecWarnings(*r).empty());
  }
  // An explicit 0 is kept, with a warning that says what is not protected.
  auto zero = ParseClusterSpec(Replace(kGood, "seed: 7,", "seed: 7, byzantine_tolerance: 0,"), "c.yaml");
  REQUIRE(zero.ok());
  CHECK(zero->training.byzantine_tolerance == 0);
  CHECK(zero->training.byzantine_tolerance_set);
  const auto w = SpecWarnings(*zero);
  REQUIRE(w.size() == 1);
  CHECK_THAT(w[0], Catch::Contains("aggregation trimmed_mean with byzantine_tolerance 0"));
  CHECK_THAT(w[0], Catch::Contains("training.byzantine_tolerance is set to 0"));
  CHECK_THAT(w[0], Catch::Contains("trusts every chunk's owner"));
  // Too few nodes for a verified ring (2f+1 = 3): stays 0, with the warning.
  const std::string two_nodes = Replace(kGood, "count: 4", "count: 1");
  auto small = ParseClusterSpec(two_nodes, "c.yaml");
  REQUIRE(small.ok());
  CHECK(small->training.byzantine_tolerance == 0);
  REQUIRE(SpecWarnings(*small).size() == 1);
  CHECK_THAT(SpecWarnings(*small)[0], Catch::Contains("the spec has 2 nodes"));
  // Above the verified ring's limit: refused at parse, not at every round.
  auto big = ParseClusterSpec(Replace(kGood, "seed: 7,", "seed: 7, byzantine_tolerance: 32,"), "c.yaml");
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message() ==
        "c.yaml:3: training.byzantine_tolerance must be <= 31 (the verified ring's limit; got 32)");
}

TEST_CASE("scheduler.holder_wait_s: default 300 s, >= 0") {
  auto d = ParseClusterSpec(kGood, "c.yaml");
  REQUIRE(d.ok());
  CHECK(d->scheduler.holder_wait_s == 300);
  auto set = ParseClusterSpec(std::string(kGood) + "scheduler: {holder_wait_s: 2.5}\n", "c.yaml");
  REQUIRE(set.ok());
  CHECK(set->scheduler.holder_wait_s == 2.5);
  auto neg = ParseClusterSpec(std::string(kGood) + "scheduler: {holder_wait_s: -1}\n", "c.yaml");
  REQUIRE_FALSE(neg.ok());
  CHECK_THAT(neg.status().message(), Catch::Contains("scheduler.holder_wait_s must be a number >= 0"));
}

TEST_CASE("scheduler.partition_timeout_ms: 30000, 60000 with a model, an explicit value wins, >= 0") {
  CHECK(loft::SchedulerSpec{}.partition_timeout_ms == 30000);  // a spec built in code: no model
  auto d = ParseClusterSpec(kGood, "c.yaml");                  // model: mlp
  REQUIRE(d.ok());
  CHECK(d->scheduler.partition_timeout_ms == 60000);
  auto none = ParseClusterSpec(Replace(kGood, "model: mlp", "model: none"), "c.yaml");
  REQUIRE(none.ok());
  CHECK(none->scheduler.partition_timeout_ms == 30000);
  // A scheduler section without the key still gets the spec's default.
  auto other = ParseClusterSpec(std::string(kGood) + "scheduler: {holder_wait_s: 5}\n", "c.yaml");
  REQUIRE(other.ok());
  CHECK(other->scheduler.partition_timeout_ms == 60000);
  auto set = ParseClusterSpec(std::string(kGood) + "scheduler: {partition_timeout_ms: 7000}\n", "c.yaml");
  REQUIRE(set.ok());
  CHECK(set->scheduler.partition_timeout_ms == 7000);
  auto off = ParseClusterSpec(std::string(kGood) + "scheduler: {partition_timeout_ms: 0}\n", "c.yaml");
  REQUIRE(off.ok());
  CHECK(off->scheduler.partition_timeout_ms == 0);
  auto neg = ParseClusterSpec(std::string(kGood) + "scheduler: {partition_timeout_ms: -1}\n", "c.yaml");
  REQUIRE_FALSE(neg.ok());
  CHECK_THAT(neg.status().message(), Catch::Contains("scheduler.partition_timeout_ms must be a number >= 0"));
}

TEST_CASE("training.byzantine_tolerance: needs 2f+1 nodes, clear error when too small") {
  auto two = ParseClusterSpec(Replace(kGood, "seed: 7,", "seed: 7, byzantine_tolerance: 2,"), "c.yaml");
  REQUIRE(two.ok());  // 5 nodes = 2*2+1
  CHECK(two->training.byzantine_tolerance == 2);
  auto three = ParseClusterSpec(Replace(kGood, "seed: 7,", "seed: 7, byzantine_tolerance: 3,"), "c.yaml");
  REQUIRE_FALSE(three.ok());
  CHECK(three.status().message() ==
        "c.yaml:3: training.byzantine_tolerance 3 needs at least 7 nodes (2f+1), the spec has 5");
  auto neg = ParseClusterSpec(Replace(kGood, "seed: 7,", "seed: 7, byzantine_tolerance: -1,"), "c.yaml");
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.status().message() == "c.yaml:3: training.byzantine_tolerance must be >= 0");
  auto modes = ParseClusterSpec(Replace(kGood, "byzantine: none", "byzantine: chunk_scale"), "c.yaml");
  REQUIRE(modes.ok());
  CHECK(modes->nodes[0].byzantine == ByzantineKind::kChunkScale);
  CHECK(ByzantineKindName(ByzantineKind::kPhantomRound) == "phantom_round");
}

TEST_CASE("scheduler heartbeat settings: cluster run's by default, checked") {
  auto plain = ParseClusterSpec(kGood, "c.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->scheduler.heartbeat_interval_ms == 250);
  CHECK(plain->scheduler.heartbeat_timeout_ms == 1500);
  auto set = ParseClusterSpec(
      std::string(kGood) + "scheduler: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 0}\n", "c.yaml");
  REQUIRE(set.ok());
  CHECK(set->scheduler.heartbeat_interval_ms == 100);
  CHECK(set->scheduler.heartbeat_timeout_ms == 0);  // the death is noticed at once
  auto bad = ParseClusterSpec(std::string(kGood) + "scheduler: {heartbeat_interval_ms: 0}\n", "c.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("scheduler.heartbeat_interval_ms must be > 0") != std::string::npos);
  auto neg = ParseClusterSpec(std::string(kGood) + "scheduler: {heartbeat_timeout_ms: -1}\n", "c.yaml");
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.status().message().find("scheduler.heartbeat_timeout_ms must be >= 0") != std::string::npos);
}

TEST_CASE("training.exchange: defaults, period N, auto, compression, overlap, and bad values named") {
  auto base = ParseClusterSpec(kGood, "cluster.yaml");
  REQUIRE(base.ok());
  const auto& d = base->training.exchange;
  CHECK(d.period == 1);
  CHECK_FALSE(d.period_auto);
  CHECK(d.compression == "none");
  CHECK_FALSE(d.overlap);
  CHECK(d.is_default());
  auto with = [](const std::string& exchange) {
    std::string y = kGood;
    const std::string key = "aggregation: trimmed_mean}";
    y.replace(y.find(key), key.size(), "aggregation: trimmed_mean, exchange: " + exchange + "}");
    return ParseClusterSpec(y, "cluster.yaml");
  };
  auto four = with("{period: 4, compression: int8, overlap: true}");
  REQUIRE(four.ok());
  CHECK(four->training.exchange.period == 4);
  CHECK(four->training.exchange.compression == "int8");
  CHECK(four->training.exchange.overlap);
  CHECK_FALSE(four->training.exchange.is_default());
  auto aut = with("{period: auto, max_period: 8}");
  REQUIRE(aut.ok());
  CHECK(aut->training.exchange.period_auto);
  CHECK(aut->training.exchange.max_period == 8);
  CHECK(aut->training.exchange.drift == 0.0625);
  CHECK(with("{period: auto, drift: 0.5}")->training.exchange.drift == 0.5);
  auto message = [&](const std::string& exchange) {
    auto s = with(exchange);
    REQUIRE_FALSE(s.ok());
    return s.status().message();
  };
  CHECK_THAT(message("{period: 0}"),
             Catch::Contains("training.exchange.period must be auto or an integer >= 1"));
  CHECK_THAT(message("{period: sometimes}"), Catch::Contains("training.exchange.period"));
  CHECK_THAT(message("{compression: fp16}"),
             Catch::Contains("training.exchange.compression must be one of none, int8 (got 'fp16')"));
  CHECK_THAT(message("{max_period: 0}"),
             Catch::Contains("training.exchange.max_period must be in [1, 1024]"));
  CHECK_THAT(message("{drift: 0}"), Catch::Contains("training.exchange.drift must be a number in (0, 100]"));
  CHECK_THAT(message("{drift: -1}"), Catch::Contains("training.exchange.drift"));
  CHECK_THAT(message("{perod: 2}"), Catch::Contains("training.exchange.perod is not a known field"));
  // Reading during the exchange overlaps the compute stage: refused when
  // training.overlap forbids that.
  std::string no_overlap = kGood;
  const std::string key = "aggregation: trimmed_mean}", on = "overlap: true, seed";
  no_overlap.replace(no_overlap.find(key), key.size(),
                     "aggregation: trimmed_mean, exchange: {period: 2, overlap: true}}");
  no_overlap.replace(no_overlap.find(on), on.size(), "overlap: false, seed");
  auto refused = ParseClusterSpec(no_overlap, "cluster.yaml");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(),
             Catch::Contains("training.exchange.overlap") && Catch::Contains("needs training.overlap true"));
}

TEST_CASE("dataset.encoding and augment: raw and none by default, jpeg keys parsed, bad values named") {
  SECTION("defaults: raw, no augmentation") {
    auto spec = ParseClusterSpec(kGood, "c.yaml");
    REQUIRE(spec.ok());
    CHECK(spec->dataset.encoding == DatasetEncoding::kRaw);
    CHECK(spec->dataset.augment == AugmentKind::kNone);
    CHECK(spec->dataset.image_size == 96);
    CHECK(spec->dataset.jpeg_quality == 90);
    CHECK(DatasetEncodingName(spec->dataset.encoding) == "raw");
    CHECK(AugmentKindName(spec->dataset.augment) == "none");
  }
  const std::string from = "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}";
  auto with = [&](const std::string& extra) {
    return ParseClusterSpec(
        Replace(kGood, from,
                "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784, " + extra + "}"),
        "c.yaml");
  };
  SECTION("the contract's jpeg spec") {
    auto spec = with("encoding: jpeg, image_size: 128, jpeg_quality: 75, augment: crop_flip");
    REQUIRE(spec.ok());
    CHECK(spec->dataset.encoding == DatasetEncoding::kJpeg);
    CHECK(spec->dataset.image_size == 128);
    CHECK(spec->dataset.jpeg_quality == 75);
    CHECK(spec->dataset.augment == AugmentKind::kCropFlip);
    CHECK(spec->dataset.sample_bytes == 784);
    CHECK(DatasetEncodingName(spec->dataset.encoding) == "jpeg");
    CHECK(AugmentKindName(spec->dataset.augment) == "crop_flip");
  }
  SECTION("jpeg keeps the size and quality defaults; augment works with raw") {
    auto jpeg = with("encoding: jpeg");
    REQUIRE(jpeg.ok());
    CHECK(jpeg->dataset.image_size == 96);
    CHECK(jpeg->dataset.jpeg_quality == 90);
    auto raw = with("encoding: raw, augment: crop_flip");
    REQUIRE(raw.ok());
    CHECK(raw->dataset.encoding == DatasetEncoding::kRaw);
    CHECK(raw->dataset.augment == AugmentKind::kCropFlip);
  }
  SECTION("bounds are inclusive") {
    CHECK(with("encoding: jpeg, image_size: 28, jpeg_quality: 1").ok());
    CHECK(with("encoding: jpeg, image_size: 1024, jpeg_quality: 100").ok());
  }
  SECTION("bad values name file, line and field") {
    auto check = [&](const std::string& extra, const std::string& message) {
      auto spec = with(extra);
      REQUIRE_FALSE(spec.ok());
      CHECK(spec.status().message() == message);
    };
    check("encoding: png", "c.yaml:1: dataset.encoding must be one of raw, jpeg (got 'png')");
    check("augment: rotate", "c.yaml:1: dataset.augment must be one of none, crop_flip (got 'rotate')");
    check("encoding: jpeg, image_size: 27", "c.yaml:1: dataset.image_size must be in [28, 1024] (got 27)");
    check("encoding: jpeg, image_size: 1025",
          "c.yaml:1: dataset.image_size must be in [28, 1024] (got 1025)");
    check("encoding: jpeg, jpeg_quality: 0", "c.yaml:1: dataset.jpeg_quality must be in [1, 100] (got 0)");
    check("encoding: jpeg, jpeg_quality: 101",
          "c.yaml:1: dataset.jpeg_quality must be in [1, 100] (got 101)");
    check("encoding: jpeg, image_size: big", "c.yaml:1: dataset.image_size has an invalid value 'big'");
    check("image_size: 96", "c.yaml:1: dataset.image_size applies only with encoding: jpeg");
    check("encoding: raw, jpeg_quality: 90",
          "c.yaml:1: dataset.jpeg_quality applies only with encoding: jpeg");
    check("quality: 90",
          "c.yaml:1: dataset.quality is not a known field (expected one of: name, samples, sample_bytes, "
          "encoding, image_size, jpeg_quality, augment, record_bytes, decode_placement)");
    check("encoding: raw, decode_placement: auto",
          "c.yaml:1: dataset.decode_placement applies only with encoding: jpeg");
    check("encoding: jpeg, decode_placement: holder",
          "c.yaml:1: dataset.decode_placement must be one of trainer, auto (got 'holder')");
    check("encoding: jpeg, record_bytes: -3",
          "c.yaml:1: dataset.record_bytes must be a number >= 0 (0: estimated from image_size)");
  }
}

TEST_CASE("a string field outside its names: one message form, naming file, line, names and value") {
  auto message = [](const std::string& from, const std::string& to) {
    auto spec = ParseClusterSpec(Replace(kGood, from, to), "c.yaml");
    REQUIRE_FALSE(spec.ok());
    return spec.status().message();
  };
  CHECK(message("model: mlp", "model: cnn") ==
        "c.yaml:4: training.model must be one of none, softmax, mlp, external (got 'cnn')");
  CHECK(message("aggregation: trimmed_mean", "aggregation: vote") ==
        "c.yaml:4: training.aggregation must be one of mean, weighted_mean, median, trimmed_mean, krum, "
        "centered_clip (got 'vote')");
  CHECK(message("aggregation: trimmed_mean}", "aggregation: trimmed_mean, lr_schedule: {kind: linear}}") ==
        "c.yaml:4: training.lr_schedule.kind must be one of constant, step, cosine (got 'linear')");
  CHECK(message("kind: shards", "kind: ring") ==
        "c.yaml:2: placement.kind must be one of shards, zipf, explicit (got 'ring')");
  // The names map to their kinds (explicit needs shares: its own test).
  for (const char* kind : {"shards", "zipf"}) {
    auto spec = ParseClusterSpec(Replace(kGood, "kind: shards", std::string("kind: ") + kind), "c.yaml");
    REQUIRE(spec.ok());
    CHECK(PlacementKindName(spec->placement.kind) == kind);
  }
}
