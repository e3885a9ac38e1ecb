#include "scheduler/journal.h"

#include <google/protobuf/io/coded_stream.h>
#include <rocksdb/db.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/message_parts.h"

namespace loft::sched {

namespace {
uint32_t Crc32(std::string_view bytes) {
  // zlib's crc32 is the same CRC-32 as boost::crc_32_type (reflected
  // 0xEDB88320, init and final xor 0xFFFFFFFF), several times faster.
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return OkStatus();
  if (s.IsCorruption()) return DataLoss(what + ": " + s.ToString());
  if (s.IsNotFound()) return NotFound(what + ": " + s.ToString());
  if (s.IsInvalidArgument()) return InvalidArgument(what + ": " + s.ToString());
  return IOError(what + ": " + s.ToString());
}

uint64_t DecodeKey(std::string_view key) {
  uint64_t seq = 0;
  for (unsigned char c : key.substr(0, 8)) seq = (seq << 8) | c;
  return seq;
}

uint32_t GetLE32(std::string_view bytes) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

void PutLE32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void PutLE64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetLE64(std::string_view bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

constexpr char kSnapshotsColumnFamily[] = "snapshots";
constexpr uint32_t kPartedFormatVersion = 2;
// Protobuf parses at most 2 GiB at once (an int size).
constexpr size_t kMaxPartBytes = (size_t{1} << 31) - 4096;

// Key of part `index` of the snapshot at `seq`: the 8-byte key, then the
// index as 4 bytes big-endian (sorts after its head, before seq + 1).
std::string PartKey(uint64_t seq, uint32_t index) {
  std::string key = Journal::EncodeKey(seq);
  for (int i = 3; i >= 0; --i) key.push_back(static_cast<char>((index >> (8 * i)) & 0xff));
  return key;
}

// The newest snapshot head (an 8-byte key) of the snapshots family, -1 if
// none: part keys (12 bytes) are skipped, also those a crash left without
// a head. DataLoss on a key of another size.
StatusOr<int64_t> LastSnapshotHead(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                                   const std::string& what) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf));
  for (it->SeekToLast(); it->Valid(); it->Prev()) {
    if (it->key().size() == 12) continue;
    if (it->key().size() != 8) {
      return DataLoss(what + ": a snapshot key is " + std::to_string(it->key().size()) +
                      " bytes, expected 8 (head) or 12 (part)");
    }
    return static_cast<int64_t>(DecodeKey(it->key().ToStringView()));
  }
  LOFT_RETURN_IF_ERROR(FromRocks(it->status(), what + ": scan"));
  return int64_t{-1};
}

// The last key of `cf` as a sequence number (-1: empty). DataLoss when a
// key is not 8 bytes.
StatusOr<int64_t> LastSeq(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, const std::string& what) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf));
  it->SeekToLast();
  int64_t last = -1;
  if (it->Valid()) {
    if (it->key().size() != 8) {
      return DataLoss(what + ": last key is " + std::to_string(it->key().size()) + " bytes, expected 8");
    }
    last = static_cast<int64_t>(DecodeKey(it->key().ToStringView()));
  }
  LOFT_RETURN_IF_ERROR(FromRocks(it->status(), what + ": scan"));
  return last;
}
}  // namespace

std::string Journal::EncodeKey(uint64_t seq) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i) {
    key[i] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return key;
}

std::string Journal::EncodeValue(const loft::v1::StateUpdate& update) {
  std::string value;
  EncodeValueTo(update, value);
  return value;
}

void Journal::EncodeValueTo(const loft::v1::StateUpdate& update, std::string& value) {
  // Serialize straight behind the 4 CRC bytes (no second copy). `value`'s
  // buffer is reused: resize only writes the bytes beyond its old size.
  const size_t size = update.ByteSizeLong();
  value.resize(4 + size);
  update.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(value.data() + 4));
  const uint32_t crc = Crc32(std::string_view(value).substr(4));
  for (int i = 0; i < 4; ++i) value[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
}

StatusOr<loft::v1::StateUpdate> Journal::DecodeValue(uint64_t seq, std::string_view value) {
  const std::string where = "journal entry " + std::to_string(seq);
  if (value.size() < 4) {
    return DataLoss(where + ": " + std::to_string(value.size()) + " bytes, shorter than its CRC");
  }
  const uint32_t stored = GetLE32(value);
  const std::string_view payload = value.substr(4);
  if (Crc32(payload) != stored) return DataLoss(where + ": CRC mismatch (truncated or corrupt)");
  loft::v1::StateUpdate u;
  if (payload.size() > kMaxPartBytes) {
    return DataLoss(where + ": " + std::to_string(payload.size()) + " bytes, more than an entry can hold");
  }
  if (!u.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return DataLoss(where + ": payload is not a StateUpdate");
  }
  if (u.kind_case() == loft::v1::StateUpdate::KIND_NOT_SET) return DataLoss(where + ": update has no kind");
  return u;
}

std::string Journal::EncodeSnapshotValue(const loft::v1::StateSnapshot& snapshot) {
  const size_t size = snapshot.ByteSizeLong();
  std::string value(8 + size, '\0');
  PutLE32(value.data() + 4, kSnapshotFormatVersion);
  snapshot.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(value.data() + 8));
  PutLE32(value.data(), Crc32(std::string_view(value).substr(4)));
  return value;
}

StatusOr<loft::v1::StateSnapshot> Journal::DecodeSnapshotValue(uint64_t seq, std::string_view value) {
  const std::string where = "journal snapshot at entry " + std::to_string(seq);
  if (value.size() < 8) {
    return DataLoss(where + ": " + std::to_string(value.size()) +
                    " bytes, shorter than its header (CRC and format version)");
  }
  if (Crc32(value.substr(4)) != GetLE32(value))
    return DataLoss(where + ": CRC mismatch (truncated or corrupt)");
  const uint32_t version = GetLE32(value.substr(4));
  if (version == kPartedFormatVersion) {
    return DataLoss(where + ": a snapshot in parts (format version 2): read it with ReadSnapshot");
  }
  if (version != kSnapshotFormatVersion) {
    return DataLoss(where + ": unknown snapshot format version " + std::to_string(version) +
                    " (this scheduler reads versions " + std::to_string(kSnapshotFormatVersion) + " and " +
                    std::to_string(kPartedFormatVersion) + "); it was written by another scheduler release");
  }
  const std::string_view payload = value.substr(8);
  loft::v1::StateSnapshot snapshot;
  if (payload.size() > kMaxPartBytes ||
      !snapshot.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return DataLoss(where + ": payload is not a StateSnapshot");
  }
  return snapshot;
}

std::string Journal::EncodeSnapshotHead(uint32_t parts, uint64_t payload_bytes) {
  std::string value(20, '\0');
  PutLE32(value.data() + 4, kPartedFormatVersion);
  PutLE32(value.data() + 8, parts);
  PutLE64(value.data() + 12, payload_bytes);
  PutLE32(value.data(), Crc32(std::string_view(value).substr(4)));
  return value;
}

std::string Journal::EncodeSnapshotPart(uint32_t index, const google::protobuf::Message& piece) {
  const size_t size = piece.ByteSizeLong();
  std::string value(12 + size, '\0');
  PutLE32(value.data() + 4, kPartedFormatVersion);
  PutLE32(value.data() + 8, index);
  piece.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(value.data() + 12));
  PutLE32(value.data(), Crc32(std::string_view(value).substr(4)));
  return value;
}

Journal::Journal(std::string path, JournalOptions options, rocksdb::DB* db,
                 std::vector<rocksdb::ColumnFamilyHandle*> handles, uint64_t next_seq, uint64_t snapshot_seq)
    : path_(std::move(path)),
      options_(options),
      db_(db),
      handles_(std::move(handles)),
      next_seq_(next_seq),
      snapshot_seq_(snapshot_seq),
      batch_(std::make_unique<rocksdb::WriteBatch>()) {}

Journal::~Journal() {
  if (db_ != nullptr) {
    for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
    delete db_;
  }
}

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& path, JournalOptions options) {
  if (path.empty()) return InvalidArgument("journal: empty path");
  rocksdb::Options o;
  o.create_if_missing = options.create_if_missing;
  o.error_if_exists = options.error_if_exists;
  o.paranoid_checks = true;
  // Journals written before snapshots existed have the default column
  // family only; the snapshots family is added on first open.
  o.create_missing_column_families = true;
  // The journal only appends (one writer, growing keys) and reads back
  // only at recovery: an append-only vector memtable (sorted when read or
  // flushed) inserts an entry in O(1) instead of a skiplist insert. It does
  // not support concurrent memtable writes, which one writer never needs.
  // Neither option changes what is stored (WAL and table files are the same).
  o.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  o.allow_concurrent_memtable_write = false;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions(o)},
      {kSnapshotsColumnFamily, rocksdb::ColumnFamilyOptions()}};
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  LOFT_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(rocksdb::DBOptions(o), path, families, &handles, &db),
                                 "journal: open " + path));
  // Owns db and handles from here on (the destructor closes them).
  std::unique_ptr<Journal> j(new Journal(path, options, db, std::move(handles), 0, 0));
  LOFT_ASSIGN_OR_RETURN(const int64_t last_entry, LastSeq(db, j->handles_[0], "journal " + path));
  LOFT_ASSIGN_OR_RETURN(const int64_t snapshot,
                        LastSnapshotHead(db, j->handles_[1], "journal " + path + " snapshots"));
  j->snapshot_seq_ = snapshot >= 0 ? static_cast<uint64_t>(snapshot) : 0;
  // After a snapshot the next entry continues at its sequence number even
  // when no entry was written after it.
  j->next_seq_ = std::max(j->snapshot_seq_, static_cast<uint64_t>(last_entry + 1));
  return j;
}

Status Journal::WriteSnapshot(const loft::v1::StateSnapshot& snapshot) {
  const uint64_t seq = next_seq_;
  if (seq == 0) return FailedPrecondition("journal " + path_ + ": no entries to snapshot");
  if (seq == snapshot_seq_) return OkStatus();  // the stored snapshot covers every entry already
  const std::string where = "journal " + path_ + ": snapshot at entry " + std::to_string(seq);
  // 1. The snapshot, in parts when it is larger than one (its head last:
  // a crash before it leaves parts without a head, which are ignored).
  Status written = PutSnapshot(seq, snapshot);
  // 2. It must read back before the entries it covers go.
  if (written.ok()) written = VerifySnapshot(seq);
  if (!written.ok()) {
    rocksdb::WriteBatch undo;
    Status cleaned = FromRocks(undo.Delete(handles_[1], EncodeKey(seq)), "journal: undo batch");
    if (cleaned.ok()) {
      cleaned = FromRocks(undo.DeleteRange(handles_[1], PartKey(seq, 0), EncodeKey(seq + 1)),
                          "journal: undo batch");
    }
    if (cleaned.ok()) cleaned = FromRocks(db_->Write(rocksdb::WriteOptions(), &undo), where + ": undo");
    return written.WithContext(where + " (not stored; the entries are kept" +
                               (cleaned.ok() ? std::string(")") : "; " + cleaned.ToString() + ")"));
  }
  // 3. Then, in one batch, the entries and every older snapshot below it.
  rocksdb::WriteBatch batch;
  LOFT_RETURN_IF_ERROR(
      FromRocks(batch.DeleteRange(handles_[1], EncodeKey(0), EncodeKey(seq)), "journal: snapshot batch"));
  LOFT_RETURN_IF_ERROR(
      FromRocks(batch.DeleteRange(handles_[0], EncodeKey(0), EncodeKey(seq)), "journal: snapshot batch"));
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  LOFT_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), where + ": delete the entries it covers"));
  snapshot_seq_ = seq;
  ++snapshots_written_;
  if (options_.sync) ++synced_writes_;
  RequestFlush();
  return OkStatus();
}

Status Journal::PutSnapshot(uint64_t seq, const loft::v1::StateSnapshot& snapshot) {
  const std::string where = "journal " + path_ + ": snapshot at entry " + std::to_string(seq);
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  const size_t part_bytes = std::clamp<size_t>(options_.snapshot_part_bytes, 64, kMaxPartBytes);
  if (snapshot.ByteSizeLong() <= part_bytes) {  // one value, format version 1
    LOFT_RETURN_IF_ERROR(
        FromRocks(db_->Put(wo, handles_[1], EncodeKey(seq), EncodeSnapshotValue(snapshot)), where));
    if (options_.sync) ++synced_writes_;
    return OkStatus();
  }
  uint32_t parts = 0;
  uint64_t bytes = 0;
  rocksdb::WriteOptions part_wo;  // the head's synced write makes them durable (one WAL)
  Status st = SplitMessage(snapshot, part_bytes, [&](const google::protobuf::Message& piece) -> Status {
    if (piece.ByteSizeLong() > kMaxPartBytes) {
      return InvalidArgument(where + ": one field holds " + std::to_string(piece.ByteSizeLong()) +
                             " bytes, more than a part can (2 GiB)");
    }
    const std::string value = EncodeSnapshotPart(parts, piece);
    bytes += value.size() - 12;
    LOFT_RETURN_IF_ERROR(FromRocks(db_->Put(part_wo, handles_[1], PartKey(seq, parts), value),
                                   where + ": part " + std::to_string(parts)));
    ++parts;
    return OkStatus();
  });
  LOFT_RETURN_IF_ERROR(st);
  LOFT_RETURN_IF_ERROR(
      FromRocks(db_->Put(wo, handles_[1], EncodeKey(seq), EncodeSnapshotHead(parts, bytes)), where));
  if (options_.sync) ++synced_writes_;
  return OkStatus();
}

Status Journal::VerifySnapshot(uint64_t seq) const {
  // Every part is read and parsed on its own (memory: one part), the
  // sizes add up to the head's, and a one-value snapshot decodes.
  return ReadSnapshotAt(seq, nullptr);
}

Status Journal::ReadSnapshotAt(uint64_t seq, loft::v1::StateSnapshot* out) const {
  const std::string where = "journal snapshot at entry " + std::to_string(seq);
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  std::string value;
  const rocksdb::Status s = db_->Get(ro, handles_[1], EncodeKey(seq), &value);
  if (s.IsNotFound()) return DataLoss(where + " vanished while open");
  LOFT_RETURN_IF_ERROR(FromRocks(s, "journal: read snapshot " + path_));
  if (value.size() != 20 || GetLE32(std::string_view(value).substr(4)) != kPartedFormatVersion) {
    LOFT_ASSIGN_OR_RETURN(loft::v1::StateSnapshot snapshot, DecodeSnapshotValue(seq, value));
    if (out != nullptr) *out = std::move(snapshot);
    return OkStatus();
  }
  if (Crc32(std::string_view(value).substr(4)) != GetLE32(value))
    return DataLoss(where + ": CRC mismatch in its head (truncated or corrupt)");
  const uint32_t parts = GetLE32(std::string_view(value).substr(8));
  const uint64_t want_bytes = GetLE64(std::string_view(value).substr(12));
  uint64_t bytes = 0;
  loft::v1::StateSnapshot scratch;
  for (uint32_t i = 0; i < parts; ++i) {
    const std::string part = where + ", part " + std::to_string(i) + " of " + std::to_string(parts);
    const rocksdb::Status ps = db_->Get(ro, handles_[1], PartKey(seq, i), &value);
    if (ps.IsNotFound()) return DataLoss(part + " is missing");
    LOFT_RETURN_IF_ERROR(FromRocks(ps, "journal: read " + part));
    if (value.size() < 12) return DataLoss(part + ": " + std::to_string(value.size()) + " bytes");
    if (Crc32(std::string_view(value).substr(4)) != GetLE32(value))
      return DataLoss(part + ": CRC mismatch (truncated or corrupt)");
    if (GetLE32(std::string_view(value).substr(4)) != kPartedFormatVersion ||
        GetLE32(std::string_view(value).substr(8)) != i) {
      return DataLoss(part + ": not part " + std::to_string(i) + " of a version 2 snapshot");
    }
    const std::string_view payload = std::string_view(value).substr(12);
    if (payload.size() > kMaxPartBytes)
      return DataLoss(part + ": " + std::to_string(payload.size()) + " bytes");
    bytes += payload.size();
    loft::v1::StateSnapshot* into = out != nullptr ? out : &scratch;
    if (out == nullptr) scratch.Clear();
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(payload.data()),
                                              static_cast<int>(payload.size()));
    if (!into->MergeFromCodedStream(&in) || !in.ConsumedEntireMessage())
      return DataLoss(part + ": payload is not a StateSnapshot");
  }
  if (bytes != want_bytes) {
    return DataLoss(where + ": its parts hold " + std::to_string(bytes) + " bytes, its head says " +
                    std::to_string(want_bytes));
  }
  return OkStatus();
}

void Journal::RequestFlush() {
  // The WAL still holds the deleted entries until the memtables are
  // flushed: ask for a background flush (not waited for) so the WAL files
  // can be dropped and flush / compaction drop the deleted entries. Only
  // when no earlier flush is still pending: another immutable memtable
  // could then stop writes (max_write_buffer_number). Best effort: when it
  // is skipped or refused, RocksDB flushes once a memtable is full and the
  // next snapshot asks again.
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    uint64_t immutable = 0;
    if (!db_->GetIntProperty(h, rocksdb::DB::Properties::kNumImmutableMemTable, &immutable) ||
        immutable > 0) {
      return;
    }
  }
  rocksdb::FlushOptions fo;
  fo.wait = false;
  fo.allow_write_stall = true;  // checked above: this flush cannot stall writes
  db_->Flush(fo, handles_).PermitUncheckedError();
}

StatusOr<std::optional<loft::v1::StateSnapshot>> Journal::ReadSnapshot() const {
  if (snapshot_seq_ == 0) return std::optional<loft::v1::StateSnapshot>();
  loft::v1::StateSnapshot snapshot;
  LOFT_RETURN_IF_ERROR(ReadSnapshotAt(snapshot_seq_, &snapshot));
  return std::optional<loft::v1::StateSnapshot>(std::move(snapshot));
}

Status Journal::Append(const loft::v1::StateUpdate& update) {
  return AppendAll(std::span<const loft::v1::StateUpdate>(&update, 1));
}

Status Journal::AppendAll(std::span<const loft::v1::StateUpdate> updates) {
  return Write(updates, options_.sync);
}

Status Journal::AppendAllUnsynced(std::span<const loft::v1::StateUpdate> updates) {
  return Write(updates, false);
}

Status Journal::Sync() {
  if (!options_.sync) return OkStatus();
  LOFT_RETURN_IF_ERROR(FromRocks(db_->SyncWAL(), "journal: sync " + path_));
  ++synced_writes_;
  return OkStatus();
}

Status Journal::Write(std::span<const loft::v1::StateUpdate> updates, bool sync) {
  if (updates.empty()) return OkStatus();
  // The batch and the value buffer are members: their buffers (tens of KB
  // for an iteration's partitions) are reused instead of reallocated.
  rocksdb::WriteBatch& batch = *batch_;
  batch.Clear();
  uint64_t seq = next_seq_;
  for (const auto& u : updates) {
    if (u.kind_case() == loft::v1::StateUpdate::KIND_NOT_SET) {
      return InvalidArgument("journal: update " + std::to_string(seq) + " has no kind");
    }
    EncodeValueTo(u, value_);
    LOFT_RETURN_IF_ERROR(FromRocks(batch.Put(handles_[0], EncodeKey(seq), value_), "journal: batch"));
    ++seq;
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  wo.disableWAL = false;
  LOFT_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "journal: write " + path_));
  if (sync) ++synced_writes_;
  next_seq_ = seq;
  return OkStatus();
}

StatusOr<std::vector<loft::v1::StateUpdate>> Journal::ReadAll() const {
  std::vector<loft::v1::StateUpdate> out;
  LOFT_RETURN_IF_ERROR(ReadInChunks(4096, [&out](std::span<const loft::v1::StateUpdate> chunk) {
                         out.insert(out.end(), chunk.begin(), chunk.end());
                         return OkStatus();
                       }).status());
  return out;
}

StatusOr<uint64_t> Journal::ReadInChunks(
    size_t max_updates, const std::function<Status(std::span<const loft::v1::StateUpdate>)>& fn) const {
  std::vector<loft::v1::StateUpdate> out;
  max_updates = std::max<size_t>(1, max_updates);
  out.reserve(std::min<size_t>(max_updates, 4096));
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[0]));
  // Entries below the newest snapshot were deleted with its write.
  uint64_t expected = snapshot_seq_;
  for (it->Seek(EncodeKey(snapshot_seq_)); it->Valid(); it->Next()) {
    if (it->key().size() != 8) {
      return DataLoss("journal entry after " + std::to_string(expected) + ": key is " +
                      std::to_string(it->key().size()) + " bytes, expected 8");
    }
    const uint64_t seq = DecodeKey(it->key().ToStringView());
    if (seq != expected) {
      return DataLoss("journal entry " + std::to_string(expected) + " is missing (next entry is " +
                      std::to_string(seq) + ")");
    }
    LOFT_ASSIGN_OR_RETURN(loft::v1::StateUpdate u, DecodeValue(seq, it->value().ToStringView()));
    out.push_back(std::move(u));
    ++expected;
    if (out.size() >= max_updates) {
      LOFT_RETURN_IF_ERROR(fn(out));
      out.clear();
    }
  }
  LOFT_RETURN_IF_ERROR(FromRocks(it->status(), "journal: read " + path_));
  if (!out.empty()) LOFT_RETURN_IF_ERROR(fn(out));
  return expected - snapshot_seq_;
}

}  // namespace loft::sched
