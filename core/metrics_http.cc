#include "core/metrics_http.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "core/log_limiter.h"

namespace loft {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `active` counts open sessions (io thread only); decremented on destruction.
  Session(tcp::socket sock, const metrics::Registry* reg, int* active)
      : stream_(std::move(sock)), reg_(reg), active_(active) {
    ++*active_;
  }
  ~Session() { --*active_; }
  void Start() {
    stream_.expires_after(std::chrono::seconds(5));
    http::async_read(stream_, buf_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->Respond();
    });
  }

 private:
  void Respond() {
    res_.version(req_.version());
    res_.keep_alive(false);
    if (req_.method() == http::verb::get && (req_.target() == "/metrics" || req_.target() == "/")) {
      res_.result(http::status::ok);
      res_.set(http::field::content_type, "text/plain; version=0.0.4");
      res_.body() = reg_->Render();
    } else {
      res_.result(http::status::not_found);
      res_.set(http::field::content_type, "text/plain");
      res_.body() = "not found; try GET /metrics\n";
    }
    res_.prepare_payload();
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  beast::tcp_stream stream_;
  const metrics::Registry* reg_;
  int* active_;
  beast::flat_buffer buf_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

}  // namespace

struct MetricsHttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  const metrics::Registry* registry = nullptr;
  std::thread thread;
  uint16_t port = 0;
  int max_connections = MetricsHttpServer::kDefaultMaxConnections;
  int active = 0;  // open sessions; io thread only
  asio::steady_timer retry{io};
  LogRateLimiter warn_limit{5, std::chrono::seconds(10)};

  static std::string Note(int64_t dropped) {
    return dropped > 0 ? " (" + std::to_string(dropped) + " similar not logged)" : "";
  }
  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket sock) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        // EMFILE and friends: back off instead of spinning, log rarely.
        if (int64_t dropped = 0; warn_limit.Allow(std::chrono::steady_clock::now(), &dropped))
          spdlog::warn("metrics http accept: {}{}", ec.message(), Note(dropped));
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && acceptor.is_open()) Accept();
        });
        return;
      }
      if (active >= max_connections) {
        // Over the cap: close at once (no file descriptor held for 5 s).
        if (int64_t dropped = 0; warn_limit.Allow(std::chrono::steady_clock::now(), &dropped))
          spdlog::warn("metrics http: {} connections open (the cap); refusing more{}", active, Note(dropped));
        beast::error_code ignored;
        sock.close(ignored);
      } else {
        std::make_shared<Session>(std::move(sock), registry, &active)->Start();
      }
      Accept();
    });
  }
};

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsHttpServer::~MetricsHttpServer() {
  Stop();
}

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const metrics::Registry* registry,
                                                                      const std::string& address,
                                                                      uint16_t port, int max_connections) {
  if (max_connections < 1) return InvalidArgument("metrics http: max_connections must be >= 1");
  auto impl = std::make_unique<Impl>();
  impl->registry = registry;
  impl->max_connections = max_connections;
  beast::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return InvalidArgument("metrics address '" + address + "' is not an IP address: " + ec.message());
  tcp::endpoint ep(addr, port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Unavailable("metrics http: cannot listen on " + address + ":" + std::to_string(port) + ": " +
                       ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl)));
}

uint16_t MetricsHttpServer::port() const {
  return impl_->port;
}

void MetricsHttpServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  asio::post(impl_->io, [i = impl_.get()] {
    beast::error_code ec;
    i->acceptor.close(ec);
  });
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace loft
