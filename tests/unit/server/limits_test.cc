// server/message_limits.h (per-type field bounds, inbound limit, reports
// that change no state) and server/sessions_file.h (typed sessions.json).
#include <catch2/catch.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "server/message_limits.h"
#include "server/sessions_file.h"

namespace {
loft::ClusterSpec Spec() {
  auto s = loft::ParseClusterSpec(
      "dataset: {name: fashion-mnist, samples: 256, sample_bytes: 784}\n"
      "training: {global_batch: 64, min_batch: 8}\n"
      "nodes:\n  - name: edge\n    count: 4\n",
      "spec.yaml");
  REQUIRE(s.ok());
  return *s;
}
}  // namespace

TEST_CASE("CheckFieldSizes refuses an oversized field, naming it") {
  const auto spec = Spec();
  loft::v1::Envelope e;
  auto* f = e.mutable_partition_failed();
  f->set_reason(std::string(loft::server::kMaxReasonBytes, 'x'));
  CHECK(loft::server::CheckFieldSizes(e, spec).ok());
  f->set_reason(std::string(15u << 20, 'x'));
  auto st = loft::server::CheckFieldSizes(e, spec);
  CHECK(st.code() == loft::StatusCode::kInvalidArgument);
  CHECK(st.message().find("PartitionFailed.reason has 15728640 bytes; at most 4096") != std::string::npos);
  f->set_reason("ok");
  for (int i = 0; i < 65; ++i) f->add_bad_samples(static_cast<uint64_t>(i));  // > global_batch
  CHECK(loft::server::CheckFieldSizes(e, spec).message().find("PartitionFailed.bad_samples") !=
        std::string::npos);

  loft::v1::Envelope d;
  auto* tr = d.mutable_partition_done()->mutable_timings()->mutable_training();
  for (int i = 0; i < 1000; ++i) tr->add_applied_partitions(static_cast<uint64_t>(i));
  CHECK(loft::server::CheckFieldSizes(d, spec).message().find("applied_partitions") != std::string::npos);

  loft::v1::Envelope p;
  p.mutable_peer_report()->set_reason(std::string(300, 'r'));
  CHECK(loft::server::CheckFieldSizes(p, spec).message().find("PeerReport.reason") != std::string::npos);
  loft::v1::Envelope ok;
  ok.mutable_status_request();
  CHECK(loft::server::CheckFieldSizes(ok, spec).ok());
}

TEST_CASE("the scheduler's inbound limit is far below 16 MiB and capped by max_message_bytes") {
  const auto spec = Spec();
  const size_t limit = loft::server::InboundMessageLimit(spec, 16u << 20);
  CHECK(limit < (2u << 20));
  CHECK(limit > loft::server::kMaxReasonBytes + 64 * 10);
  CHECK(loft::server::InboundMessageLimit(spec, 4096) == 4096);
}

TEST_CASE("sessions.json round-trips, a mistyped one is an error naming the file and field") {
  using loft::server::ParseSessions;
  std::vector<loft::server::SessionEntry> in = {{2, "tcp://a:1", "tcp://a:2", 3, 99}};
  auto back = ParseSessions(loft::server::SessionsToJson(in), "j/sessions.json");
  REQUIRE(back.ok());
  REQUIRE(back->size() == 1);
  CHECK((*back)[0].node == 2);
  CHECK((*back)[0].peer_endpoint == "tcp://a:1");
  CHECK((*back)[0].credits == 3);
  CHECK((*back)[0].cache_samples == 99);
  auto bad = ParseSessions(R"([{"node": "zero"}])", "j/sessions.json");
  CHECK(bad.status().message() ==
        "j/sessions.json: entry [0] field 'node' must be an integer (got \"zero\")");
  bad = ParseSessions(R"([{"node": 1, "credits": "2"}])", "j/sessions.json");
  CHECK(bad.status().message().find("field 'credits' must be an integer") != std::string::npos);
  bad = ParseSessions(R"([{"node": 1, "peer_endpoint": 7}])", "j/sessions.json");
  CHECK(bad.status().message().find("field 'peer_endpoint' must be a string") != std::string::npos);
  CHECK(ParseSessions("{", "j/sessions.json").status().message() == "j/sessions.json: not valid JSON");
  CHECK(ParseSessions("{}", "x").status().message().find("expected a JSON array") != std::string::npos);
}
