// libloft_bench_cache_reader: the in-process baseline of
// bench/torch_consumer_bench.py, loaded there with ctypes. Reads a batch
// of samples from a loft cache (the agent's RocksDB, opened after the
// agent has exited) in the same process as the torch consumer, as fast as
// the record layer allows: one RocksDB MultiGet over the batch's ids (the
// call the agent's SampleCache makes), every record verified (header,
// CRC32C, id: VerifyRecord, as the agent's DecodeRecord does) and its
// payload copied once, straight into the caller's tensor memory; labels
// from the record header. Benchmark-only: not part of libloft's API.
//
//   void* lbcr_open(const char* dir, char* err, size_t errlen)   NULL on error
//   int   lbcr_read(void* h, const uint64_t* ids, size_t n, uint8_t* payloads,
//                   size_t payload_size, int32_t* labels, char* err, size_t errlen)
//         0 = ok; -1 = error (message in err): missing, corrupt or wrong-size record
//   void  lbcr_close(void* h)
#include <rocksdb/db.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cache/sample_cache.h"

namespace {

struct Reader {
  std::unique_ptr<loft::cache::SampleCache> cache;
  std::vector<char> keybuf;
  std::vector<rocksdb::Slice> keys;
  std::vector<rocksdb::PinnableSlice> values;
  std::vector<rocksdb::Status> statuses;
};

void Error(char* err, size_t errlen, const std::string& msg) {
  if (err != nullptr && errlen > 0) std::snprintf(err, errlen, "%s", msg.c_str());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* lbcr_open(const char* dir, char* err, size_t errlen) {
  loft::cache::CacheOptions opts;  // the agent's options (edge_agent/zmq_agent_server.cc)
  opts.create_if_missing = false;
  auto cache = loft::cache::SampleCache::Open(dir, opts);
  if (!cache.ok()) {
    Error(err, errlen, cache.status().ToString());
    return nullptr;
  }
  auto* r = new Reader();
  r->cache = std::move(cache).value();
  return r;
}

__attribute__((visibility("default"))) int lbcr_read(void* h, const uint64_t* ids, size_t n,
                                                     uint8_t* payloads, size_t payload_size, int32_t* labels,
                                                     char* err, size_t errlen) {
  auto* r = static_cast<Reader*>(h);
  if (n == 0) return 0;
  r->keybuf.resize(n * 8);
  r->keys.resize(n);
  r->values.resize(n);
  r->statuses.resize(n);
  for (size_t i = 0; i < n; ++i) {
    loft::cache::EncodeKeyTo(ids[i], r->keybuf.data() + i * 8);
    r->keys[i] = rocksdb::Slice(r->keybuf.data() + i * 8, 8);
    r->values[i].Reset();
  }
  rocksdb::DB* db = r->cache->raw_db();
  db->MultiGet(rocksdb::ReadOptions(), db->DefaultColumnFamily(), n, r->keys.data(), r->values.data(),
               r->statuses.data(), /*sorted_input=*/false);
  for (size_t i = 0; i < n; ++i) {
    if (!r->statuses[i].ok()) {
      Error(err, errlen, "sample " + std::to_string(ids[i]) + ": " + r->statuses[i].ToString());
      return -1;
    }
    const std::string_view bytes(r->values[i].data(), r->values[i].size());
    if (auto st = loft::cache::VerifyRecord(ids[i], bytes); !st.ok()) {
      Error(err, errlen, st.ToString());
      return -1;
    }
    const size_t len = bytes.size() - loft::cache::kRecordHeaderBytes - loft::cache::kRecordTrailerBytes;
    if (len != payload_size) {
      Error(err, errlen,
            "sample " + std::to_string(ids[i]) + ": " + std::to_string(len) + "-byte payload, want " +
                std::to_string(payload_size));
      return -1;
    }
    std::memcpy(payloads + i * payload_size, bytes.data() + loft::cache::kRecordHeaderBytes, len);
    uint16_t label = 0;
    std::memcpy(&label, bytes.data() + 2, sizeof label);
    labels[i] = label;
  }
  return 0;
}

__attribute__((visibility("default"))) void lbcr_close(void* h) {
  delete static_cast<Reader*>(h);
}

}  // extern "C"
