#include "server/message_limits.h"

#include <fmt/format.h>

#include <algorithm>

namespace loft::server {
namespace {

// Partitions of one iteration a training report may name (every worker's,
// two iterations open with plan-ahead, retries): generous, still O(nodes).
size_t MaxAppliedPartitions(const ClusterSpec& spec) {
  return 4 * static_cast<size_t>(spec.num_nodes()) + 64;
}
size_t MaxBatchIds(const ClusterSpec& spec) {
  return static_cast<size_t>(std::max<int64_t>(1, spec.training.global_batch));
}

Status TooBig(std::string_view field, size_t got, size_t max, std::string_view unit) {
  return InvalidArgument(fmt::format("{} has {} {}; at most {} are accepted", field, got, unit, max));
}

}  // namespace

Status CheckFieldSizes(const v1::Envelope& env, const ClusterSpec& spec) {
  const size_t nodes = static_cast<size_t>(spec.num_nodes());
  auto text = [](std::string_view field, const std::string& s, size_t max) {
    return s.size() > max ? TooBig(field, s.size(), max, "bytes") : OkStatus();
  };
  auto list = [](std::string_view field, int n, size_t max) {
    return static_cast<size_t>(n) > max ? TooBig(field, static_cast<size_t>(n), max, "entries") : OkStatus();
  };
  switch (env.body_case()) {
    case v1::Envelope::kRegisterRequest: {
      const auto& r = env.register_request();
      LOFT_RETURN_IF_ERROR(text("RegisterRequest.node_name", r.node_name(), kMaxShortTextBytes));
      return list("RegisterRequest.cache.label_counts", r.cache().label_counts_size(), kMaxLabelCounts);
    }
    case v1::Envelope::kPartitionDone: {
      const auto& t = env.partition_done().timings();
      LOFT_RETURN_IF_ERROR(list("PartitionDone.timings.remote_read_ms_by_peer",
                                static_cast<int>(t.remote_read_ms_by_peer_size()), nodes));
      const size_t applied = MaxAppliedPartitions(spec);
      LOFT_RETURN_IF_ERROR(list("PartitionDone.timings.training.applied_partitions",
                                t.training().applied_partitions_size(), applied));
      return list("PartitionDone.timings.training.applied_nodes", t.training().applied_nodes_size(), applied);
    }
    case v1::Envelope::kPartitionFailed: {
      const auto& f = env.partition_failed();
      LOFT_RETURN_IF_ERROR(text("PartitionFailed.reason", f.reason(), kMaxReasonBytes));
      LOFT_RETURN_IF_ERROR(list("PartitionFailed.poisoned_by", f.poisoned_by_size(), nodes));
      LOFT_RETURN_IF_ERROR(list("PartitionFailed.poisoned_samples", f.poisoned_samples_size(), nodes));
      return list("PartitionFailed.bad_samples", f.bad_samples_size(), MaxBatchIds(spec));
    }
    case v1::Envelope::kPeerReport:
      return text("PeerReport.reason", env.peer_report().reason(), kMaxShortTextBytes);
    case v1::Envelope::kError: return text("Error.message", env.error().message(), kMaxReasonBytes);
    default: return OkStatus();
  }
}

size_t InboundMessageLimit(const ClusterSpec& spec, size_t max_message_bytes) {
  // The largest bounded message (a failure report: reason, per-node lists,
  // one id per sample of a partition; or a training report's lists) plus
  // 64 KiB of slack for the fixed fields and the envelope.
  const size_t nodes = static_cast<size_t>(spec.num_nodes());
  const size_t failed = kMaxReasonBytes + 16 * nodes + 10 * MaxBatchIds(spec);
  const size_t done = 32 * nodes + 16 * MaxAppliedPartitions(spec);
  const size_t reg = kMaxShortTextBytes + 10 * kMaxLabelCounts + 2 * 4096;
  const size_t need = std::max({failed, done, reg}) + (64u << 10);
  return std::min(max_message_bytes, need);
}

}  // namespace loft::server
