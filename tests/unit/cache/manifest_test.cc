#include "cache/manifest.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/unit/cache/test_util.h"

using namespace loft;
using namespace loft::cache;
using loft::cache::testing::TempDir;

namespace {

IdxDataset TinyDataset(int64_t n) {
  IdxDataset ds;
  ds.count = n;
  ds.rows = 4;
  ds.cols = 4;
  ds.images.resize(static_cast<size_t>(n) * 16);
  for (size_t i = 0; i < ds.images.size(); ++i) ds.images[i] = static_cast<uint8_t>(i * 13 + 1);
  for (int64_t i = 0; i < n; ++i) ds.labels.push_back(static_cast<uint8_t>(i % 10));
  return ds;
}

std::span<const uint8_t> Image(const IdxDataset& ds, int64_t i) {
  return std::span<const uint8_t>(ds.images.data() + i * 16, 16);
}

}  // namespace

TEST_CASE("The manifest accepts genuine samples and refuses forged labels, payloads and ids", "[cache]") {
  IdxDataset ds = TinyDataset(50);
  auto m = Manifest::Build(ds, 40);
  REQUIRE(m.ok());
  REQUIRE(m->size() == 40);
  REQUIRE(m->digests().size() == 40 * kSampleDigestBytes);
  for (int64_t i = 0; i < 40; ++i) REQUIRE(m->Check(i, ds.labels[i], Image(ds, i)) == ManifestCheck::kMatch);
  // A flipped label with the genuine image (what poison_serve sends).
  REQUIRE(m->Check(3, (ds.labels[3] + 1) % 10, Image(ds, 3)) == ManifestCheck::kMismatch);
  // Another sample's image and label under this id.
  REQUIRE(m->Check(3, ds.labels[4], Image(ds, 4)) == ManifestCheck::kMismatch);
  // One changed pixel.
  std::vector<uint8_t> px(Image(ds, 5).begin(), Image(ds, 5).end());
  px[7] ^= 1;
  REQUIRE(m->Check(5, ds.labels[5], px) == ManifestCheck::kMismatch);
  // The id is hashed: sample 6's data under id 16 (same label) does not pass.
  REQUIRE(ds.labels[6] == ds.labels[16]);
  REQUIRE(m->Check(16, ds.labels[6], Image(ds, 6)) == ManifestCheck::kMismatch);
  // Outside the manifest.
  REQUIRE(m->Check(40, ds.labels[40], Image(ds, 40)) == ManifestCheck::kUnknownId);
  REQUIRE_FALSE(Manifest::Build(ds, 51).ok());
}

TEST_CASE("SampleDigest is BLAKE2b-128 of id, label and payload", "[cache]") {
  const std::vector<uint8_t> p = {1, 2, 3};
  const std::string d = SampleDigest(7, 2, p);
  REQUIRE(d.size() == 16);
  REQUIRE(d == SampleDigest(7, 2, p));
  REQUIRE(d != SampleDigest(8, 2, p));
  REQUIRE(d != SampleDigest(7, 3, p));
  REQUIRE(d != SampleDigest(7, 2, std::vector<uint8_t>{1, 2, 4}));
}

TEST_CASE("The manifest file round trips and damage is named", "[cache]") {
  TempDir tmp;
  const std::string path = tmp.Sub("MANIFEST.loft");
  auto m = Manifest::Build(TinyDataset(30), 30);
  REQUIRE(m.ok());
  REQUIRE(WriteManifestFile(path, *m).ok());
  REQUIRE(std::filesystem::file_size(path) == 16 + 30 * 16 + 32);
  auto back = ReadManifestFile(path);
  REQUIRE(back.ok());
  REQUIRE(back->digests() == m->digests());
  REQUIRE(back->RootHex() == m->RootHex());
  REQUIRE(m->RootHex().size() == 64);

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto write = [&](const std::string& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << b;
  };
  std::string flipped = bytes;
  flipped[16 + 5 * 16] ^= 1;  // one digest changed
  write(flipped);
  REQUIRE_THAT(ReadManifestFile(path).status().message(),
               Catch::Contains(path) && Catch::Contains("root digest"));
  write(bytes.substr(0, bytes.size() - 16));
  REQUIRE_THAT(ReadManifestFile(path).status().message(), Catch::Contains("header names 30 samples"));
  write("not a manifest at all, just some text of sufficient length to pass the size check");
  REQUIRE_THAT(ReadManifestFile(path).status().message(), Catch::Contains("bad magic"));
  REQUIRE(ReadManifestFile(tmp.Sub("missing")).status().code() == StatusCode::kNotFound);

  REQUIRE_FALSE(Manifest::FromDigests(std::string(17, 'x')).ok());
  REQUIRE(Manifest::FromDigests(std::string(32, 'x'))->size() == 2);
}
