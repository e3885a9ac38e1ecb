#include "server/sessions_file.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace loft::server {
using nlohmann::json;

std::string SessionsToJson(const std::vector<SessionEntry>& entries) {
  json j = json::array();
  for (const SessionEntry& e : entries) {
    j.push_back({{"node", e.node},
                 {"peer_endpoint", e.peer_endpoint},
                 {"ring_endpoint", e.ring_endpoint},
                 {"credits", e.credits},
                 {"cache_samples", e.cache_samples}});
  }
  return j.dump(1);
}

StatusOr<std::vector<SessionEntry>> ParseSessions(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  if (!j.is_array()) return InvalidArgument(path + ": expected a JSON array of sessions");
  std::vector<SessionEntry> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_object()) return InvalidArgument(fmt::format("{}: entry [{}] is not an object", path, i));
    auto bad = [&](const char* field, const char* want) {
      return InvalidArgument(fmt::format("{}: entry [{}] field '{}' must be {} (got {})", path, i, field,
                                         want, e[field].dump().substr(0, 80)));
    };
    SessionEntry s;
    if (!e.contains("node")) return InvalidArgument(fmt::format("{}: entry [{}] has no 'node'", path, i));
    if (!e["node"].is_number_integer()) return bad("node", "an integer");
    s.node = e["node"].get<int64_t>() < 0 || e["node"].get<int64_t>() > INT32_MAX
                 ? -1
                 : static_cast<int32_t>(e["node"].get<int64_t>());
    for (auto [field, dst] :
         {std::pair{"peer_endpoint", &s.peer_endpoint}, std::pair{"ring_endpoint", &s.ring_endpoint}}) {
      if (!e.contains(field)) continue;
      if (!e[field].is_string()) return bad(field, "a string");
      *dst = e[field].get<std::string>();
    }
    for (auto [field, dst] :
         {std::pair{"credits", &s.credits}, std::pair{"cache_samples", &s.cache_samples}}) {
      if (!e.contains(field)) continue;
      if (!e[field].is_number_integer()) return bad(field, "an integer");
      *dst = e[field].get<int64_t>();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace loft::server
