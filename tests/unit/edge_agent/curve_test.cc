#include "core/curve.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace loft;
using loft::agent::testing::TempDir;

TEST_CASE("CURVE key pairs round-trip through key files") {
  TempDir dir;
  auto kp = GenerateCurveKeyPair();
  REQUIRE(kp.ok());
  CHECK(IsValidZ85Key(kp->public_key));
  CHECK(IsValidZ85Key(kp->secret_key));
  REQUIRE(WriteCurveKeyPair(dir.Sub("keys"), "edge-a", *kp).ok());
  auto back = ReadCurveKeyPair(dir.Sub("keys/edge-a.key"));
  REQUIRE(back.ok());
  CHECK(back->public_key == kp->public_key);
  CHECK(back->secret_key == kp->secret_key);
  auto pub = ReadCurvePublicKey(dir.Sub("keys/edge-a.pub"));
  REQUIRE(pub.ok());
  CHECK(*pub == kp->public_key);
  auto perms = std::filesystem::status(dir.Sub("keys/edge-a.key")).permissions();
  CHECK((perms & std::filesystem::perms::group_read) == std::filesystem::perms::none);
  auto other = GenerateCurveKeyPair();
  REQUIRE(other.ok());
  REQUIRE(WriteCurveKeyPair(dir.Sub("keys"), "scheduler", *other).ok());
  auto allow = ReadCurveAllowList(dir.Sub("keys"));
  REQUIRE(allow.ok());
  CHECK(allow->size() == 2);
  CHECK(allow->at(kp->public_key) == "edge-a");
  CHECK(allow->at(other->public_key) == "scheduler");
}

TEST_CASE("Malformed key files are errors naming the file") {
  TempDir dir;
  std::string bad = dir.Sub("bad.pub");
  std::ofstream(bad) << "not-a-key\n";
  auto pub = ReadCurvePublicKey(bad);
  REQUIRE_FALSE(pub.ok());
  CHECK(pub.status().message() == bad + ": not a 40-character Z85 public key");
  auto allow = ReadCurveAllowList(dir.path().string());
  CHECK(allow.status().code() == StatusCode::kInvalidArgument);
  CHECK(ReadCurveKeyPair(dir.Sub("missing.key")).status().code() == StatusCode::kNotFound);
  TempDir empty;
  CHECK(ReadCurveAllowList(empty.path().string()).status().code() == StatusCode::kNotFound);
}

TEST_CASE("Insecure mode is allowed only on loopback endpoints") {
  CHECK(IsLoopbackEndpoint("tcp://127.0.0.1:5555"));
  CHECK(IsLoopbackEndpoint("tcp://127.3.2.1:*"));
  CHECK(IsLoopbackEndpoint("tcp://localhost:80"));
  CHECK(IsLoopbackEndpoint("tcp://[::1]:80"));
  CHECK(IsLoopbackEndpoint("inproc://x"));
  CHECK(IsLoopbackEndpoint("ipc:///tmp/x"));
  CHECK_FALSE(IsLoopbackEndpoint("tcp://0.0.0.0:5555"));
  CHECK_FALSE(IsLoopbackEndpoint("tcp://*:5555"));
  CHECK_FALSE(IsLoopbackEndpoint("tcp://10.0.0.1:5555"));
  CHECK_FALSE(IsLoopbackEndpoint("tcp://128.0.0.1:5555"));
  CHECK(CheckInsecureAllowed({"tcp://127.0.0.1:1", "inproc://a"}).ok());
  Status st = CheckInsecureAllowed({"tcp://127.0.0.1:1", "tcp://192.168.1.4:9"});
  CHECK(st.code() == StatusCode::kPermissionDenied);
  CHECK(st.message() ==
        "--insecure (no CURVE) is allowed only on loopback endpoints; 'tcp://192.168.1.4:9' is not loopback");
}

TEST_CASE("A DNS name that merely starts with 127. is not loopback") {
  CHECK_FALSE(IsLoopbackEndpoint("tcp://127.0.0.1.example.com:80"));
}
