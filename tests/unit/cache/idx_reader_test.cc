#include "cache/idx_reader.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tests/unit/cache/test_util.h"

using namespace loft;
using namespace loft::cache;
using loft::cache::testing::TempDir;

namespace {

const std::string kDir = LOFT_FASHION_MNIST_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Decompressed contents of a .gz file.
std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb1");  // fastest level: tests only
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

}  // namespace

TEST_CASE("Fashion-MNIST train split loads with the published shape", "[idx]") {
  auto ds = LoadFashionMnist(kDir, "train");
  REQUIRE(ds.ok());
  REQUIRE(ds->count == 60000);
  REQUIRE(ds->rows == 28);
  REQUIRE(ds->cols == 28);
  REQUIRE(ds->images.size() == 60000u * 784u);
  REQUIRE(ds->labels.size() == 60000u);
  std::vector<int> counts(10, 0);
  for (uint8_t l : ds->labels) {
    REQUIRE(l < 10);
    ++counts[l];
  }
  for (int c : counts) REQUIRE(c == 6000);  // Fashion-MNIST train is balanced
  // Known first labels of the training set: 9 (ankle boot), 0, 0, 3.
  REQUIRE(ds->labels[0] == 9);
  REQUIRE(ds->labels[1] == 0);
  REQUIRE(ds->labels[3] == 3);
}

TEST_CASE("Fashion-MNIST test split loads", "[idx]") {
  auto ds = LoadFashionMnist(kDir, "test");
  REQUIRE(ds.ok());
  REQUIRE(ds->count == 10000);
  REQUIRE(ds->rows == 28);
  REQUIRE(ds->cols == 28);
  REQUIRE(ds->images.size() == 10000u * 784u);
  for (uint8_t l : ds->labels) REQUIRE(l < 10);
  REQUIRE(ds->labels[0] == 9);
}

TEST_CASE("Unknown split and missing files give clear errors", "[idx]") {
  auto bad = LoadFashionMnist(kDir, "validation");
  REQUIRE(bad.status().code() == StatusCode::kInvalidArgument);
  REQUIRE_THAT(bad.status().message(), Catch::Contains("validation"));
  TempDir tmp;
  auto missing = LoadFashionMnist(tmp.path(), "train");
  REQUIRE(missing.status().code() == StatusCode::kNotFound);
  REQUIRE_THAT(missing.status().message(), Catch::Contains("train-images-idx3-ubyte.gz"));
}

TEST_CASE("Truncated and corrupt IDX files are rejected naming the file", "[idx]") {
  TempDir tmp;
  const std::string images_src = kDir + "/t10k-images-idx3-ubyte.gz";
  const std::string labels_src = kDir + "/t10k-labels-idx1-ubyte.gz";
  const std::string images = tmp.Sub("images.gz");
  const std::string labels = tmp.Sub("labels.gz");
  static const std::string raw_images = Gunzip(images_src);  // once per process
  static const std::string raw_labels = Gunzip(labels_src);
  WriteFile(labels, ReadFile(labels_src));

  SECTION("gzip stream cut in the middle") {
    const std::string gz = ReadFile(images_src);
    WriteFile(images, gz.substr(0, gz.size() / 2));
    auto r = ReadIdx(images, labels);
    REQUIRE(r.status().code() == StatusCode::kDataLoss);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images));
    REQUIRE_THAT(r.status().message(), Catch::Contains("truncated") || Catch::Contains("corrupt"));
  }
  SECTION("valid gzip whose IDX data is short") {
    WriteGz(images, raw_images.substr(0, raw_images.size() - 100));
    auto r = ReadIdx(images, labels);
    REQUIRE(r.status().code() == StatusCode::kDataLoss);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images) && Catch::Contains("truncated"));
  }
  SECTION("file shorter than the header") {
    WriteGz(images, raw_images.substr(0, 10));
    auto r = ReadIdx(images, labels);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images) && Catch::Contains("IDX header"));
  }
  SECTION("bad magic number") {
    std::string bad = raw_images;
    bad[3] = 0x01;  // 0x00000801: a labels magic in an images file
    WriteGz(images, bad);
    auto r = ReadIdx(images, labels);
    REQUIRE(r.status().code() == StatusCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images) &&
                                           Catch::Contains("bad magic number 0x00000801") &&
                                           Catch::Contains("0x00000803"));
  }
  SECTION("swapped images and labels") {
    WriteFile(images, ReadFile(images_src));
    auto r = ReadIdx(labels, images);
    REQUIRE(r.status().code() == StatusCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains(labels) && Catch::Contains("bad magic"));
  }
  SECTION("zero dimension") {
    std::string bad = raw_images;
    bad.replace(8, 4, Be32(0));
    WriteGz(images, bad);
    auto r = ReadIdx(images, labels);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images) && Catch::Contains("dimension 1 is 0"));
  }
  SECTION("trailing garbage") {
    WriteGz(images, raw_images + "xx");
    auto r = ReadIdx(images, labels);
    REQUIRE_THAT(r.status().message(), Catch::Contains(images) && Catch::Contains("trailing bytes"));
  }
  SECTION("image and label counts differ") {
    WriteFile(images, ReadFile(images_src));
    std::string fewer = Be32(0x801) + Be32(9999) + raw_labels.substr(8, 9999);
    WriteGz(labels, fewer);
    auto r = ReadIdx(images, labels);
    REQUIRE(r.status().code() == StatusCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains("10000 images") && Catch::Contains("9999 labels"));
  }
  SECTION("label out of range for Fashion-MNIST") {
    WriteFile(tmp.Sub("t10k-images-idx3-ubyte.gz"), ReadFile(images_src));
    std::string bad = raw_labels;
    bad[8 + 17] = 12;
    WriteGz(tmp.Sub("t10k-labels-idx1-ubyte.gz"), bad);
    auto r = LoadFashionMnist(tmp.path(), "test");
    REQUIRE(r.status().code() == StatusCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains("label 12 at index 17"));
  }
  SECTION("a header promising gigabytes the file does not hold") {
    // 2^20 images of 64 x 64 (4 GiB) in a file of 35 bytes: found by
    // fuzz_loaders, which ran out of memory. The buffer now grows with the
    // data: in a child limited to 1 GiB of address space the read fails as
    // truncated instead of dying on the allocation.
    WriteGz(images, Be32(0x803) + Be32(1u << 20) + Be32(64) + Be32(64) + "abc");
#if defined(__SANITIZE_ADDRESS__)
    // (Catch2 2.13 has no SKIP: the section passes with a note.)
    WARN("not run under ASan: it reserves terabytes of address space, RLIMIT_AS cannot bound the read");
#else
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const rlimit limit{size_t{1} << 30, size_t{1} << 30};
      ::setrlimit(RLIMIT_AS, &limit);
      try {
        auto r = ReadIdx(images, labels);
        const bool truncated = r.status().code() == StatusCode::kDataLoss &&
                               r.status().message().find("truncated") != std::string::npos;
        std::_Exit(truncated ? 0 : 3);
      } catch (...) {
        std::_Exit(4);  // std::bad_alloc: it tried to allocate what the header promised
      }
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("child status " << status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
#endif
  }
  SECTION("an intact copy reads fine (control)") {
    WriteGz(images, raw_images);
    auto r = ReadIdx(images, labels);
    REQUIRE(r.ok());
    REQUIRE(r->count == 10000);
  }
}
