// cache_corrupt_record DIR ID [MODE [MANIFEST]]: test helper that damages
// one stored record underneath the cache (raw RocksDB write). ID `first`:
// the cache's first sample, whose id is then printed. MODE: flip
// (default; flips a payload bit), truncate, version; or undecodable: the
// payload cut to its first half and the record re-encoded, so it passes
// its CRC but a JPEG payload no longer decodes. With MANIFEST (a dataset
// manifest file, cache/manifest.h) undecodable also rewrites that sample's
// digest there to the cut payload's, as if the dataset itself held the bad
// image: a peer serving it is then not taken for a forger. Exit 0 on
// success.
#include <rocksdb/db.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cache/manifest.h"
#include "cache/sample_cache.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s DIR ID [flip|truncate|version|undecodable [MANIFEST]]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  // ID "first": the cache's first sample (its id is printed).
  const bool first = std::string(argv[2]) == "first";
  uint64_t id = first ? 0 : std::strtoull(argv[2], nullptr, 10);
  const std::string mode = argc >= 4 ? argv[3] : "flip";
  if (argc == 5 && mode != "undecodable") {
    std::fprintf(stderr, "a manifest goes with mode undecodable only\n");
    return 2;
  }
  auto db = loft::cache::OpenRawDb(dir);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  std::string value;
  if (first) {
    std::unique_ptr<rocksdb::Iterator> it((*db)->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid() && it->key().size() != 8; it->Next()) {
    }
    if (!it->Valid()) {
      std::fprintf(stderr, "no sample record in %s\n", dir.c_str());
      return 1;
    }
    for (unsigned char c : it->key().ToString()) id = (id << 8) | c;
  }
  auto s = (*db)->Get(rocksdb::ReadOptions(), loft::cache::EncodeKey(id), &value);
  if (!s.ok()) {
    std::fprintf(stderr, "sample %llu: %s\n", static_cast<unsigned long long>(id), s.ToString().c_str());
    return 1;
  }
  if (mode == "flip" && value.size() > loft::cache::kRecordHeaderBytes) {
    value[loft::cache::kRecordHeaderBytes] ^= 0x01;
  } else if (mode == "truncate" && !value.empty()) {
    value.resize(value.size() / 2);
  } else if (mode == "version" && !value.empty()) {
    value[0] = static_cast<char>(value[0] + 1);
  } else if (mode == "undecodable") {
    auto sample = loft::cache::DecodeRecord(id, value);
    if (!sample.ok() || sample->payload.size() < 2) {
      std::fprintf(stderr, "sample %llu: not a good record to cut\n", static_cast<unsigned long long>(id));
      return 1;
    }
    sample->payload.resize(sample->payload.size() / 2);
    value = loft::cache::EncodeRecord(id, sample->label, sample->payload);
    if (argc == 5) {
      auto m = loft::cache::ReadManifestFile(argv[4]);
      if (!m.ok() || static_cast<int64_t>(id) >= m->size()) {
        std::fprintf(stderr, "%s: %s\n", argv[4], m.ok() ? "too few samples" : m.status().ToString().c_str());
        return 1;
      }
      std::string digests = m->digests();
      const std::string d = loft::cache::SampleDigest(id, sample->label, sample->payload);
      digests.replace(id * d.size(), d.size(), d);
      auto updated = loft::cache::Manifest::FromDigests(std::move(digests));
      loft::Status ws = updated.ok() ? loft::cache::WriteManifestFile(argv[4], *updated) : updated.status();
      if (!ws.ok()) {
        std::fprintf(stderr, "%s: %s\n", argv[4], ws.ToString().c_str());
        return 1;
      }
    }
  } else {
    std::fprintf(stderr, "cannot apply mode '%s' to a %zu-byte value\n", mode.c_str(), value.size());
    return 2;
  }
  s = (*db)->Put(rocksdb::WriteOptions(), loft::cache::EncodeKey(id), value);
  if (s.ok()) s = (*db)->Close();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (first) std::printf("%llu\n", static_cast<unsigned long long>(id));
  return 0;
}
