#include "edge_agent/ring_hello.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/codec.h"
#include "core/proto/loft.pb.h"

namespace loft::agent {

std::vector<std::byte> EncodeHello(const MemberHello& h) {
  v1::RingHello m;
  m.set_protocol_version(kProtocolVersion);
  m.set_samples(h.b);
  m.set_last_round(h.last_round);
  m.set_param_hash(h.hash);
  m.set_reports(h.reports);
  m.set_partition(h.partition);
  m.set_length(h.length);  // 0 (the built-in trainer's) is not on the wire
  const std::string s = m.SerializeAsString();
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

StatusOr<MemberHello> DecodeHello(std::span<const std::byte> bytes) {
  v1::RingHello m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return InvalidArgument("ring hello: " + std::to_string(bytes.size()) + " bytes that are not a RingHello");
  if (m.protocol_version() != kProtocolVersion) {
    return InvalidArgument("ring hello: protocol version " + std::to_string(m.protocol_version()) +
                           " is not supported (this build speaks version " +
                           std::to_string(kProtocolVersion) + ")");
  }
  if (!std::isfinite(m.samples()) || m.samples() < 0)
    return InvalidArgument("ring hello: sample count " + std::to_string(m.samples()));
  if (m.samples() == 0 && m.partition() != 0)
    return InvalidArgument("ring hello: partition " + std::to_string(m.partition()) + " with no samples");
  if (m.last_round() < -1 || m.last_round() > int64_t{std::numeric_limits<uint32_t>::max()})
    return InvalidArgument("ring hello: last_round " + std::to_string(m.last_round()) + " is no ring round");
  MemberHello h;
  h.b = m.samples();
  h.last_round = m.last_round();
  h.hash = m.param_hash();
  h.reports = m.reports();
  h.partition = m.partition();
  h.length = m.length();
  return h;
}

}  // namespace loft::agent
