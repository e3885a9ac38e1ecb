// sessions.json: the scheduler's soft per-node session state (endpoints,
// credit window, cache size), kept in journal_dir so that a restarted
// scheduler can keep serving agents that do not re-register. Written
// durably (core/durable_file.h); read back after a restart.
//
// Format: a JSON array of objects {node: int, peer_endpoint: string,
// ring_endpoint: string, credits: int, cache_samples: int}; every key is
// optional except `node`. A file that does not parse or has a field of the
// wrong type is an InvalidArgument naming the file, the entry and the
// field (the caller logs it and starts without sessions: agents register
// again).
//
// Not responsible for: deciding which entries apply (the service checks
// the node's range and liveness).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loft::server {

struct SessionEntry {
  int32_t node = -1;
  std::string peer_endpoint;
  std::string ring_endpoint;
  int64_t credits = 1;
  int64_t cache_samples = 0;
};

std::string SessionsToJson(const std::vector<SessionEntry>& entries);
// `path` is only used in error messages.
StatusOr<std::vector<SessionEntry>> ParseSessions(const std::string& text, const std::string& path);

}  // namespace loft::server
