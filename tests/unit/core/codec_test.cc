#include "core/codec.h"

#include <catch2/catch.hpp>

using namespace loft;

namespace {
v1::Envelope FetchEnvelope() {
  v1::Envelope env;
  auto* f = env.mutable_fetch_request();
  f->set_request_id(42);
  f->set_partition_id(7);
  f->set_requester(3);
  for (uint64_t i = 0; i < 64; ++i) f->add_sample_ids(i * 11);
  return env;
}
}  // namespace

TEST_CASE("Encode stamps the protocol version and Decode round-trips") {
  auto bytes = Encode(FetchEnvelope());
  REQUIRE(bytes.ok());
  auto env = Decode(*bytes);
  REQUIRE(env.ok());
  CHECK(env->protocol_version() == kProtocolVersion);
  REQUIRE(env->has_fetch_request());
  CHECK(env->fetch_request().request_id() == 42);
  CHECK(env->fetch_request().sample_ids_size() == 64);
  CHECK(env->fetch_request().sample_ids(63) == 63 * 11);
  CHECK(BodyName(*env) == "fetch_request");
}

TEST_CASE("Decode rejects a frame over the size limit, naming size and limit") {
  auto bytes = Encode(FetchEnvelope());
  REQUIRE(bytes.ok());
  auto env = Decode(*bytes, 10);
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kResourceExhausted);
  CHECK(env.status().message() ==
        "frame of " + std::to_string(bytes->size()) + " bytes exceeds the limit of 10 bytes");
}

TEST_CASE("Decode rejects a wrong protocol version, naming both versions") {
  v1::Envelope e = FetchEnvelope();
  e.set_protocol_version(9);
  auto bytes = Encode(e);
  REQUIRE(bytes.ok());
  auto env = Decode(*bytes);
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kFailedPrecondition);
  CHECK(env.status().message() == "protocol version 9 is not supported (this build speaks version " +
                                      std::to_string(kProtocolVersion) + ")");
}

TEST_CASE("Decode rejects undecodable bytes") {
  const std::string garbage = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
  auto env = Decode(garbage);
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kInvalidArgument);
  CHECK(env.status().message() == "frame of 11 bytes is not a valid Envelope");
}

TEST_CASE("Decode rejects a truncated frame") {
  auto bytes = Encode(FetchEnvelope());
  REQUIRE(bytes.ok());
  auto env = Decode(std::string_view(*bytes).substr(0, bytes->size() - 3));
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Decode rejects an envelope without a body") {
  v1::Envelope e;
  e.set_protocol_version(kProtocolVersion);
  e.set_sender_seq(5);
  auto bytes = Encode(e);
  REQUIRE(bytes.ok());
  auto env = Decode(*bytes);
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kInvalidArgument);
  CHECK(env.status().message() == "Envelope has no body (unknown or missing message type)");
}

TEST_CASE("An empty frame has version 0 and is rejected") {
  auto env = Decode("");
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("Error envelopes carry a Status both ways") {
  v1::Envelope e = MakeError(PermissionDenied("sample 5 not granted"), 77);
  REQUIRE(e.has_error());
  CHECK(e.error().request_id() == 77);
  Status s = StatusFromError(e.error());
  CHECK(s.code() == StatusCode::kPermissionDenied);
  CHECK(s.message() == "sample 5 not granted");
  v1::Error bad;
  bad.set_code(999);
  bad.set_message("x");
  CHECK(StatusFromError(bad).code() == StatusCode::kInvalidArgument);
  v1::Error zero;
  CHECK_FALSE(StatusFromError(zero).ok());
}
