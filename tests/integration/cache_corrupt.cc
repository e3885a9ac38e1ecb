// cache_corrupt: test helper that damages one stored record of a node's
// sample cache underneath the record layer (flips a payload byte, so the
// record fails its CRC on read).
//   cache_corrupt CACHE_DIR [SAMPLE_ID]   default: the cache's first sample
// Prints the damaged sample id. Exit 1 on error.
#include <rocksdb/db.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cache/sample_cache.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cache_corrupt CACHE_DIR [SAMPLE_ID]\n");
    return 1;
  }
  auto db = loft::cache::OpenRawDb(argv[1]);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  std::string key, value;
  if (argc > 2) {
    const uint64_t id = std::stoull(argv[2]);
    for (int b = 7; b >= 0; --b) key.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
    if (!(*db)->Get(rocksdb::ReadOptions(), key, &value).ok()) {
      std::fprintf(stderr, "sample %llu is not in %s\n", static_cast<unsigned long long>(id), argv[1]);
      return 1;
    }
  } else {
    std::unique_ptr<rocksdb::Iterator> it((*db)->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid() && it->key().size() != 8; it->Next()) {
    }
    if (!it->Valid()) {
      std::fprintf(stderr, "no sample record in %s\n", argv[1]);
      return 1;
    }
    key = it->key().ToString();
    value = it->value().ToString();
  }
  if (value.size() <= loft::cache::kRecordHeaderBytes + loft::cache::kRecordTrailerBytes) {
    std::fprintf(stderr, "record too short (%zu bytes)\n", value.size());
    return 1;
  }
  value[loft::cache::kRecordHeaderBytes] ^= 0x5a;  // first payload byte: the CRC no longer matches
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (!(*db)->Put(wo, key, value).ok()) {
    std::fprintf(stderr, "cannot write the damaged record\n");
    return 1;
  }
  uint64_t id = 0;
  for (unsigned char c : key) id = (id << 8) | c;
  std::printf("%llu\n", static_cast<unsigned long long>(id));
  return 0;
}
