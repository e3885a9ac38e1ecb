// Journal: an append-only log of StateUpdates in RocksDB, the durable
// half of SchedulerState's Apply contract, plus at most one snapshot of the
// state that stands for every entry before it. A restarted scheduler opens
// the journal, restores the snapshot (ReadSnapshot, SchedulerState::
// RestoreSnapshot) and replays the entries after it (ReadInChunks).
//
// Entries (the default column family): key = 8-byte big-endian sequence
// number (0, 1, 2, ... with no gaps from the snapshot on), value = 4-byte
// little-endian CRC-32 (the zlib / ISO-HDLC CRC, identical to
// boost::crc_32_type; computed with zlib's crc32) of the payload, then the
// serialized loft.v1.StateUpdate. A value that is too short, fails its CRC
// or does not parse, or a gap in the sequence, is a DataLoss error naming
// the sequence number.
//
// Snapshots (column family "snapshots"): key = 8-byte big-endian sequence
// number S, the first entry NOT covered (the snapshot is the state after
// entries 0 .. S-1). A snapshot of at most JournalOptions::
// snapshot_part_bytes is one value (format version 1): 4-byte LE CRC-32 of
// what follows, 4-byte LE format version 1, then the serialized
// loft.v1.StateSnapshot. A larger one (protobuf cannot parse 2 GiB at
// once) is stored in parts (format version 2): its head at key S is the
// CRC-32, version 2, the part count (u32 LE) and the parts' payload bytes
// (u64 LE); part i at key S + 4-byte big-endian i is the CRC-32, version
// 2, i (u32 LE), then a serialized StateSnapshot piece; merging the
// pieces in order is the snapshot (scheduler/message_parts.h). Sizes are
// 64-bit throughout.
// WriteSnapshot writes the parts, then the head (a crash before it leaves
// parts without a head: ignored, and deleted by the next snapshot), then
// reads the snapshot back (every part's CRC, and every part parsed), and
// only then deletes every entry and every older snapshot below S in one
// WriteBatch: a crash leaves the old journal, or both snapshots with the
// entries (replay starts at the newest snapshot), or the compacted one;
// a snapshot that does not read back is removed again and the entries
// stay. Entries continue at S:
// sequence numbers stay monotonic with no gaps after the snapshot. A
// snapshot that is too short, fails its CRC, has another format version,
// misses a part or does not parse is a DataLoss error naming it (never
// skipped: the entries it covers are gone). A journal written before
// snapshots existed opens as one without a snapshot; a scheduler from
// before then refuses to open a journal with the snapshots family (RocksDB
// names the unknown family); one from before parts reads version-1
// snapshots only (a version-2 head is an unknown format version).
//
// Writes use the WAL and, by default, sync (fsync) before Append returns:
// when Append returns OK the update survives a crash. AppendAll writes one
// atomic WriteBatch.
//
// Not responsible for: applying updates (SchedulerState), deciding when
// to snapshot (the daemon's journal_snapshot_every, server/options.h),
// building the snapshot (SchedulerState::ToSnapshot). The space of deleted
// entries is reclaimed by RocksDB's flush (requested in the background
// after each snapshot) and compaction.
// Thread-safety: not thread-safe (one writer; the daemon's state thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/proto/state.pb.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace loft::sched {

struct JournalOptions {
  bool sync = true;               // fsync each Append/AppendAll
  bool create_if_missing = true;  // else NotFound when the directory has no journal
  bool error_if_exists = false;
  // A snapshot larger than this is stored in parts of about this size
  // (clamped to [64 B, 2 GiB - 4 KiB]).
  size_t snapshot_part_bytes = size_t{64} << 20;
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
  // Makes everything written so far durable (an fsync of the WAL) when
  // JournalOptions::sync; nothing otherwise. IOError on a RocksDB failure.
  Status Sync();
  // Every entry after the newest snapshot (all of them without one), in
  // sequence order. DataLoss (naming the sequence number) on a corrupt
  // entry or a gap.
  StatusOr<std::vector<loft::v1::StateUpdate>> ReadAll() const;
  // The same entries, handed to `fn` in order in spans of at most
  // `max_updates` (recovery replays a long journal without holding it
  // whole in memory). Stops at the first non-OK status of `fn` or of the
  // read (DataLoss as for ReadAll). Returns the number of entries read.
  StatusOr<uint64_t> ReadInChunks(
      size_t max_updates, const std::function<Status(std::span<const loft::v1::StateUpdate>)>& fn) const;

  // Stores `snapshot`, the state after every entry so far (0 ..
  // next_seq()-1), reads it back, then deletes those entries and the
  // previous snapshot (synced as JournalOptions::sync). The caller
  // guarantees the snapshot is of exactly that state (the daemon: nothing
  // applied that is not yet journaled). FailedPrecondition on an empty
  // journal; nothing (OK) when the stored snapshot already covers every
  // entry; IOError on a RocksDB failure and DataLoss when it does not read
  // back (then the entries and the previous snapshot are kept). Then
  // requests a background flush (not waited for) so the write-ahead log of
  // the deleted entries can be dropped.
  Status WriteSnapshot(const loft::v1::StateSnapshot& snapshot);
  // The newest snapshot, or nullopt when there is none. DataLoss naming it
  // when it is corrupt or of an unknown format version.
  StatusOr<std::optional<loft::v1::StateSnapshot>> ReadSnapshot() const;

  uint64_t next_seq() const { return next_seq_; }
  // The first entry the newest snapshot does not cover; 0 = no snapshot.
  uint64_t snapshot_seq() const { return snapshot_seq_; }
  // Entries stored (those after the snapshot): what recovery replays.
  uint64_t entries() const { return next_seq_ - snapshot_seq_; }
  // Snapshots written through this instance.
  int64_t snapshots_written() const { return snapshots_written_; }
  // Writes through this instance that were fsynced (entries and snapshots).
  int64_t synced_writes() const { return synced_writes_; }
  const std::string& path() const { return path_; }

  static constexpr uint32_t kSnapshotFormatVersion = 1;

  // Encoding helpers (exposed for tests and tools).
  static std::string EncodeKey(uint64_t seq);
  static std::string EncodeValue(const loft::v1::StateUpdate& update);
  static StatusOr<loft::v1::StateUpdate> DecodeValue(uint64_t seq, std::string_view value);
  static std::string EncodeSnapshotValue(const loft::v1::StateSnapshot& snapshot);
  // `seq`: the snapshot's key, named in errors. Format version 1 only.
  static StatusOr<loft::v1::StateSnapshot> DecodeSnapshotValue(uint64_t seq, std::string_view value);
  // Format version 2: the head and a part (see above).
  static std::string EncodeSnapshotHead(uint32_t parts, uint64_t payload_bytes);
  static std::string EncodeSnapshotPart(uint32_t index, const google::protobuf::Message& piece);

 private:
  Journal(std::string path, JournalOptions options, rocksdb::DB* db,
          std::vector<rocksdb::ColumnFamilyHandle*> handles, uint64_t next_seq, uint64_t snapshot_seq);
  Status Write(std::span<const loft::v1::StateUpdate> updates, bool sync);
  // WriteSnapshot's steps: store the snapshot at `seq` (parts, then head),
  // read it back without keeping it.
  Status PutSnapshot(uint64_t seq, const loft::v1::StateSnapshot& snapshot);
  Status VerifySnapshot(uint64_t seq) const;
  // The snapshot at `seq` into *out; with out == nullptr, each part is
  // parsed and dropped (a check that holds one part in memory).
  Status ReadSnapshotAt(uint64_t seq, loft::v1::StateSnapshot* out) const;
  // After a snapshot: a background flush of the memtables, so the WAL
  // files holding the deleted entries can go (best effort, never blocks).
  void RequestFlush();
  // EncodeValue into `value`, reusing its buffer.
  static void EncodeValueTo(const loft::v1::StateUpdate& update, std::string& value);

  std::string path_;
  JournalOptions options_;
  rocksdb::DB* db_;
  // [0] the entries (default column family), [1] the snapshots.
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  uint64_t next_seq_;
  uint64_t snapshot_seq_;
  int64_t snapshots_written_ = 0;
  int64_t synced_writes_ = 0;
  std::unique_ptr<rocksdb::WriteBatch> batch_;  // reused by Write
  std::string value_;                           // reused by Write
};

}  // namespace loft::sched
