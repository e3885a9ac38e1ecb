// cache_corrupt_record DIR ID [MODE]: test helper that damages one stored
// record underneath the cache (raw RocksDB write). MODE: flip (default;
// flips a payload bit), truncate, version. Exit 0 on success.
#include <rocksdb/db.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/sample_cache.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s DIR ID [flip|truncate|version]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t id = std::strtoull(argv[2], nullptr, 10);
  const std::string mode = argc == 4 ? argv[3] : "flip";
  auto db = loft::cache::OpenRawDb(dir);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  std::string value;
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
  return 0;
}
