#include "tools/loftctl/testbed_host.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace loft::ctl;
namespace fs = std::filesystem;

namespace {

fs::path TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "loft-tbhost-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

void Write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fake cgroup v2 root: subtree_control holds `controllers` as the kernel
// prints them; children get the given files.
fs::path FakeRoot(const std::string& controllers) {
  fs::path root = TempDir();
  Write(root / "cgroup.subtree_control", controllers + "\n");
  return root;
}

}  // namespace

TEST_CASE("ip and tc are found in system directories by absolute path, not through PATH") {
  auto sh = FindSystemTool("sh", {"/nonexistent-loft-dir", "/bin", "/usr/bin"});
  REQUIRE(sh.ok());
  CHECK(fs::path(*sh).is_absolute());
  CHECK(fs::canonical(*sh) == fs::path(*sh));  // symlinks resolved
  CHECK(::access(sh->c_str(), X_OK) == 0);

  auto missing = FindSystemTool("no-such-loft-tool", {"/nonexistent-a", "/nonexistent-b"});
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == loft::StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent-a, /nonexistent-b"));
  CHECK_THAT(missing.status().message(), Catch::Contains("does not search PATH"));

  CHECK(FindSystemTool("bin/sh", {"/"}).status().code() == loft::StatusCode::kInvalidArgument);
}

TEST_CASE("a program anyone but its owner could replace is refused") {
  const fs::path dir = TempDir();
  const fs::path tool = dir / "ip";
  Write(tool, "#!/bin/sh\n");
  const uid_t me = ::getuid();

  ::chmod(tool.c_str(), 0775);  // group-writable
  auto gw = FindSystemTool("ip", {dir.string()}, me);
  REQUIRE(!gw.ok());
  CHECK(gw.status().code() == loft::StatusCode::kPermissionDenied);
  CHECK_THAT(gw.status().message(), Catch::Contains("writable by group or others"));

  ::chmod(tool.c_str(), 0755);
  auto other_owner = FindSystemTool("ip", {dir.string()}, me + 1);
  REQUIRE(!other_owner.ok());
  CHECK_THAT(other_owner.status().message(), Catch::Contains("is owned by uid"));

  // The file passes; its directory (under the temp dir: not root's, or
  // world-writable /tmp above it) does not.
  ::chmod(dir.c_str(), 0755);
  auto parent = FindSystemTool("ip", {dir.string()}, me);
  REQUIRE(!parent.ok());
  CHECK_THAT(parent.status().message(), Catch::Contains("directory"));

  ::chmod(tool.c_str(), 0644);  // not executable
  CHECK_THAT(FindSystemTool("ip", {dir.string()}, me).status().message(),
             Catch::Contains("not an executable file"));
  fs::remove_all(dir);
}

TEST_CASE("the testbed turns the root's cpu controller on only when it is off, and records that") {
  const fs::path state = TempDir();
  SECTION("off: turned on, recorded") {
    const fs::path root = FakeRoot("memory io");
    auto on = EnableRootCpu(root.string(), state.string(), "lft1a2b");
    REQUIRE(on.ok());
    CHECK(*on);
    CHECK(Read(root / "cgroup.subtree_control") == "+cpu");
    auto j = nlohmann::json::parse(Read(state / kRootCgroupRecord));
    CHECK(j["cgroup"] == root.string());
    CHECK(j["controller"] == "cpu");
    CHECK(j["enabled_by"] == "lft1a2b");
  }
  SECTION("already on: nothing written, no record") {
    const fs::path root = FakeRoot("cpu memory io");
    auto on = EnableRootCpu(root.string(), state.string(), "lft1a2b");
    REQUIRE(on.ok());
    CHECK(!*on);
    CHECK(Read(root / "cgroup.subtree_control") == "cpu memory io\n");
    CHECK(!fs::exists(state / kRootCgroupRecord));
  }
  SECTION("not a cgroup: an error naming the file, no record left") {
    const fs::path root = TempDir();
    fs::remove(root / "cgroup.subtree_control");
    fs::create_directory(root / "cgroup.subtree_control");  // cannot be opened for writing
    auto on = EnableRootCpu(root.string(), state.string(), "lft1a2b");
    REQUIRE(!on.ok());
    CHECK_THAT(on.status().message(), Catch::Contains("cgroup.subtree_control"));
    CHECK(!fs::exists(state / kRootCgroupRecord));
  }
}

TEST_CASE("the last testbed turns the root's cpu controller off again, unless someone else uses it") {
  const fs::path state = TempDir();
  const fs::path root = FakeRoot("memory io");
  REQUIRE(*EnableRootCpu(root.string(), state.string(), "lft1a2b"));
  Write(root / "cgroup.subtree_control", "cpu memory io\n");  // as the kernel prints it now
  auto others = [](bool v) { return [v] { return v; }; };

  SECTION("another testbed remains: kept, silently") {
    auto r = RevertRootCpu(state.string(), others(true));
    REQUIRE(r.ok());
    CHECK(r->empty());
    CHECK(Read(root / "cgroup.subtree_control") == "cpu memory io\n");
    CHECK(fs::exists(state / kRootCgroupRecord));
  }
  SECTION("the last one: turned off, record removed; a second revert does nothing") {
    fs::create_directory(root / "user.slice");
    Write(root / "user.slice" / "cpu.max", "max 100000\n");
    Write(root / "user.slice" / "cpu.weight", "100\n");
    Write(root / "user.slice" / "cgroup.subtree_control", "memory\n");
    auto r = RevertRootCpu(state.string(), others(false));
    REQUIRE(r.ok());
    CHECK_THAT(*r, Catch::Contains("turned the cpu controller off again"));
    CHECK(Read(root / "cgroup.subtree_control") == "-cpu");
    CHECK(!fs::exists(state / kRootCgroupRecord));
    auto again = RevertRootCpu(state.string(), others(false));
    REQUIRE(again.ok());
    CHECK(again->empty());
  }
  SECTION("a cgroup with a cpu quota, weight or delegation keeps it on") {
    fs::create_directory(root / "other");
    std::string file, text;
    SECTION("cpu.max") {
      file = "cpu.max";
      text = "50000 100000\n";
    }
    SECTION("cpu.weight") {
      file = "cpu.weight";
      text = "200\n";
    }
    SECTION("subtree_control") {
      file = "cgroup.subtree_control";
      text = "cpu memory\n";
    }
    Write(root / "other" / file, text);
    auto r = RevertRootCpu(state.string(), others(false));
    REQUIRE(r.ok());
    CHECK_THAT(*r, Catch::Contains("kept the cpu controller on"));
    CHECK_THAT(*r, Catch::Contains((root / "other" / file).string()));
    CHECK(Read(root / "cgroup.subtree_control") == "cpu memory io\n");
    CHECK(fs::exists(state / kRootCgroupRecord));
  }
  SECTION("someone turned it off already: only the record goes") {
    Write(root / "cgroup.subtree_control", "memory io\n");
    auto r = RevertRootCpu(state.string(), others(false));
    REQUIRE(r.ok());
    CHECK_THAT(*r, Catch::Contains("already off"));
    CHECK(Read(root / "cgroup.subtree_control") == "memory io\n");
    CHECK(!fs::exists(state / kRootCgroupRecord));
  }
}
