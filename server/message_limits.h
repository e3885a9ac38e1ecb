// Per-message-type bounds on what the scheduler accepts from a peer, so
// that one authenticated agent cannot make the scheduler hold, log or
// journal megabytes per message (journal and memory growth).
//
// CheckFieldSizes: every variable-size field of the messages the scheduler
// accepts has a bound derived from the spec (strings: fixed caps; lists: the
// number of nodes or the global batch). A message over a bound is refused
// with InvalidArgument naming the message, the field, its size and the
// bound; it never reaches the driver or the journal.
//
// InboundMessageLimit: the largest message a peer may send the scheduler
// (its ROUTER's ZMQ_MAXMSGSIZE), from the same bounds plus slack; capped
// by max_message_bytes. Messages the scheduler SENDS (RegisterReply with
// the dataset manifest) are not limited by it.
//
// Not responsible for: endpoint syntax (registration), codec checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cluster_spec.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/ledger.h"

namespace loft::server {

inline constexpr size_t kMaxReasonBytes = 4096;    // PartitionFailed.reason, Error.message
inline constexpr size_t kMaxShortTextBytes = 256;  // node names, PeerReport.reason
inline constexpr size_t kMaxLabelCounts = 65536;   // CacheSummary.label_counts (labels are u16)
// The scheduler ROUTER's per-connection queues (ZMQ_SNDHWM / ZMQ_RCVHWM),
// in messages. An agent has at most its credits of partitions plus a few
// grants, views and replies queued; a peer that floods waits (TCP
// backpressure) once kRecvHwm of its messages are queued.
inline constexpr int kSendHwm = 1000;
inline constexpr int kRecvHwm = 100;

Status CheckFieldSizes(const v1::Envelope& env, const ClusterSpec& spec);
size_t InboundMessageLimit(const ClusterSpec& spec, size_t max_message_bytes);

}  // namespace loft::server
