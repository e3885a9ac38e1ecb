// Fuzz target: the daemons' metrics endpoint (core/metrics_http.h). One
// MetricsHttpServer per process on 127.0.0.1 (any free port) over a
// registry with a counter, a labelled gauge and a histogram; each input is
// sent as the bytes of one connection (then the write side is shut, so an
// incomplete request ends at once instead of at the 5 s deadline), and
// the answer read to its end.
//
// Properties beyond "no crash, no sanitizer report":
//  - an answer is an HTTP/1.x response with status 200 (GET /metrics or
//    GET /, with the registry's text) or 404, or nothing (the request did
//    not parse: the connection is closed);
//  - after every input the server still answers GET /metrics with 200.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/metrics.h"
#include "core/metrics_http.h"
#include "fuzz_input.h"

namespace {

using loft::fuzz::Fail;

struct Server {
  loft::metrics::Registry registry;
  std::unique_ptr<loft::MetricsHttpServer> http;
  Server() {
    auto c = registry.AddCounter("loft_fuzz_requests_total", "Requests.", {"kind"});
    auto g = registry.AddGauge("loft_fuzz_view", "A gauge.");
    auto h = registry.AddHistogram("loft_fuzz_ms", "A histogram.", loft::metrics::DefaultMillisBuckets());
    if (!c.ok() || !g.ok() || !h.ok()) Fail("registry");
    (*c)->WithLabels({"a\"b\\c\nd"}).Increment(3);  // a label value that needs escaping
    (*g)->Get().Set(7);
    (*h)->Get().Observe(12.5);
    auto s = loft::MetricsHttpServer::Start(&registry, "127.0.0.1", 0);
    if (!s.ok()) Fail("metrics server: " + s.status().ToString());
    http = std::move(*s);
  }
};

Server& TheServer() {
  static Server s;
  return s;
}

// Sends `request` on a new connection, shuts the write side, returns all
// that comes back before the server closes.
std::string Exchange(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Fail("socket");
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) Fail("connect");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed early (a request it refused)
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return answer;
}

void CheckAnswer(const std::string& answer) {
  if (answer.empty()) return;
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12)
    Fail("not an HTTP response: " + answer.substr(0, 80));
  const std::string code = answer.substr(9, 3);
  if (code != "200" && code != "404") Fail("status " + code);
  if (code == "200" && answer.find("loft_fuzz_view 7") == std::string::npos)
    Fail("a 200 without the metrics");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& s = TheServer();
  const std::string request(reinterpret_cast<const char*>(data), size);
  CheckAnswer(Exchange(s.http->port(), request));
  const std::string again = Exchange(s.http->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  if (again.rfind("HTTP/1.1 200", 0) != 0) Fail("the server stopped answering: " + again.substr(0, 80));
  return 0;
}
