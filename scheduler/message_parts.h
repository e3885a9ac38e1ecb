// SplitMessage: a protobuf message as a sequence of pieces of bounded
// size whose merge (Message::MergeFrom, in order) is the message, so a
// journal snapshot of any size is stored and read back in parts that each
// fit protobuf's 2 GiB limit (scheduler/journal.h "Snapshots").
//
// Pieces are messages of the same type. The first carries the singular
// scalar, string and bytes fields; then come the elements of each
// repeated field in order (a field's elements stay in order across
// pieces, so merging appends them back in order) and each singular
// message field, whole when it fits one piece and otherwise split the same
// way (each of its pieces wrapped in an otherwise empty parent: merging
// merges them into the one field). A piece's ByteSizeLong is at most
// `limit` unless one element (a repeated element, a string or bytes
// field) is larger alone: it is then a piece of its own. A message whose
// ByteSizeLong is at most `limit` is one piece: itself.
//
// Not responsible for: storing the pieces (Journal), oneofs and maps
// beyond what merging gives (a oneof's field is a singular field; a map
// is a repeated field of entries).
// Thread-safety: a pure function.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>
#include <functional>

#include "core/status.h"

namespace loft::sched {

// Calls `emit` with each piece in order; stops at its first non-OK status.
Status SplitMessage(const google::protobuf::Message& message, size_t limit,
                    const std::function<Status(const google::protobuf::Message&)>& emit);

}  // namespace loft::sched
