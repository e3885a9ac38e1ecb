#include "core/metrics_http.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace loft {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket sock, const metrics::Registry* reg) : stream_(std::move(sock)), reg_(reg) {}
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

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket sock) {
      if (ec) {
        if (ec != asio::error::operation_aborted) spdlog::warn("metrics http accept: {}", ec.message());
        if (!acceptor.is_open()) return;
      } else {
        std::make_shared<Session>(std::move(sock), registry)->Start();
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
                                                                      uint16_t port) {
  auto impl = std::make_unique<Impl>();
  impl->registry = registry;
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
