#include "server/endpoint_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace loft::server {
namespace {

// The value as quoted in an error: printable ASCII, at most 64 characters.
std::string Quote(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (v.size() > 64) out += fmt::format("... ({} bytes)", v.size());
  return out;
}

bool HostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

// "" when `hostport` is HOST:PORT as described in the header, else why not.
std::string TcpProblem(std::string_view hostport) {
  const size_t colon = hostport.rfind(':');
  if (colon == std::string_view::npos) return "no :PORT";
  std::string_view host = hostport.substr(0, colon);
  const std::string_view port = hostport.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "the port is not a number";
  const int p = std::stoi(std::string(port));
  if (p < 1 || p > 65535) return "the port is not in 1..65535";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.empty() || !std::all_of(host.begin(), host.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
                 c == '.';
        }))
      return "the IPv6 address is malformed";
    if (host == "::") return "the host is a wildcard";
    return "";
  }
  if (host.empty()) return "no host";
  if (host == "*" || host == "0.0.0.0") return "the host is a wildcard";
  if (!std::all_of(host.begin(), host.end(), HostChar))
    return "the host has characters a host name cannot have";
  return "";
}

}  // namespace

Status CheckAdvertisedEndpoint(std::string_view field, std::string_view ep, bool required) {
  if (ep.empty()) {
    if (!required) return OkStatus();
    return InvalidArgument(fmt::format("register: {} is empty", field));
  }
  if (ep.size() > kMaxEndpointBytes) {
    return InvalidArgument(
        fmt::format("register: {} '{}' is longer than {} bytes", field, Quote(ep), kMaxEndpointBytes));
  }
  std::string problem;
  if (ep.substr(0, 6) == "tcp://") {
    problem = TcpProblem(ep.substr(6));
  } else if (ep.substr(0, 6) == "ipc://") {
    const std::string_view path = ep.substr(6);
    if (path.empty() || !std::all_of(path.begin(), path.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
      problem = "the path is empty or not printable";
  } else {
    problem = "not tcp://HOST:PORT or ipc://PATH";
  }
  if (problem.empty()) return OkStatus();
  return InvalidArgument(
      fmt::format("register: {} '{}' is not a usable endpoint: {}", field, Quote(ep), problem));
}

}  // namespace loft::server
