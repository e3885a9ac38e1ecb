// Journal: an append-only log of StateUpdates in RocksDB, the durable
// half of SchedulerState's Apply contract. A restarted scheduler opens the
// journal, ReadAll()s it and replays it (JobDriver::Recover).
//
// Format: key = 8-byte big-endian sequence number (0, 1, 2, ... with no
// gaps), value = 4-byte little-endian CRC-32 (the zlib / ISO-HDLC CRC,
// identical to boost::crc_32_type; computed with zlib's crc32) of the
// payload, then the serialized loft.v1.StateUpdate. A value that is too
// short, fails its CRC or does not parse, or a gap in the sequence, is a
// DataLoss error naming the sequence number.
//
// Writes use the WAL and, by default, sync (fsync) before Append returns:
// when Append returns OK the update survives a crash. AppendAll writes one
// atomic WriteBatch.
//
// Not responsible for: applying updates (SchedulerState), compaction of
// old entries / snapshots (not implemented: the journal grows with the job's
// state changes; the scheduler journals nothing for reports that change no
// state, and recovery reads it in chunks, ReadInChunks).
// Thread-safety: not thread-safe (one writer; the daemon's state thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/proto/state.pb.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace loft::sched {

struct JournalOptions {
  bool sync = true;               // fsync each Append/AppendAll
  bool create_if_missing = true;  // else NotFound when the directory has no journal
  bool error_if_exists = false;
};

class Journal {
 public:
  static StatusOr<std::unique_ptr<Journal>> Open(const std::string& path, JournalOptions options = {});
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends at next_seq(). IOError on a RocksDB failure.
  Status Append(const loft::v1::StateUpdate& update);
  // Appends all, atomically (one WriteBatch), in order.
  Status AppendAll(std::span<const loft::v1::StateUpdate> updates);
  // The same, but written to the WAL without an fsync regardless of
  // JournalOptions::sync: the entries survive a crash of the process (they
  // are in the OS page cache) but not a power loss. The next synced write
  // makes them durable too (the WAL is synced as a whole). For records
  // whose loss is harmless (e.g. PartitionSent: replay then re-sends).
  Status AppendAllUnsynced(std::span<const loft::v1::StateUpdate> updates);
  // Every entry in sequence order. DataLoss (naming the sequence number)
  // on a corrupt entry or a gap.
  StatusOr<std::vector<loft::v1::StateUpdate>> ReadAll() const;
  // The same entries, handed to `fn` in order in spans of at most
  // `max_updates` (recovery replays a long journal without holding it
  // whole in memory). Stops at the first non-OK status of `fn` or of the
  // read (DataLoss as for ReadAll). Returns the number of entries read.
  StatusOr<uint64_t> ReadInChunks(
      size_t max_updates, const std::function<Status(std::span<const loft::v1::StateUpdate>)>& fn) const;

  uint64_t next_seq() const { return next_seq_; }
  const std::string& path() const { return path_; }

  // Encoding helpers (exposed for tests and tools).
  static std::string EncodeKey(uint64_t seq);
  static std::string EncodeValue(const loft::v1::StateUpdate& update);
  static StatusOr<loft::v1::StateUpdate> DecodeValue(uint64_t seq, std::string_view value);

 private:
  Journal(std::string path, JournalOptions options, rocksdb::DB* db, uint64_t next_seq);
  Status Write(std::span<const loft::v1::StateUpdate> updates, bool sync);
  // EncodeValue into `value`, reusing its buffer.
  static void EncodeValueTo(const loft::v1::StateUpdate& update, std::string& value);

  std::string path_;
  JournalOptions options_;
  rocksdb::DB* db_;
  uint64_t next_seq_;
  std::unique_ptr<rocksdb::WriteBatch> batch_;  // reused by Write
  std::string value_;                           // reused by Write
};

}  // namespace loft::sched
