#include "core/status.h"

#include <catch2/catch.hpp>

using namespace loft;

namespace {
StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}
StatusOr<int> Quarter(int x) {
  LOFT_ASSIGN_OR_RETURN(int h, Half(x));
  LOFT_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}
}  // namespace

TEST_CASE("Status carries code and message") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "OK");
  Status s = DataLoss("sample 17: CRC mismatch");
  CHECK_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.ToString() == "DataLoss: sample 17: CRC mismatch");
  CHECK(s.WithContext("cache get").message() == "cache get: sample 17: CRC mismatch");
}

TEST_CASE("StatusOr propagates errors and values") {
  auto q = Quarter(8);
  REQUIRE(q.ok());
  CHECK(*q == 2);
  auto bad = Quarter(6);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "odd: 3");
  StatusOr<int> from_ok{OkStatus()};
  CHECK(from_ok.status().code() == StatusCode::kInternal);
}
