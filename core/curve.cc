#include "core/curve.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <zmq.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/log_limiter.h"

namespace loft {
namespace fs = std::filesystem;

bool IsValidZ85Key(const std::string& key) {
  if (key.size() != 40) return false;
  std::array<uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), key.c_str()) != nullptr;
}

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  if (!zmq_has("curve")) return FailedPrecondition("libzmq was built without CURVE support");
  char pub[41] = {0};
  char sec[41] = {0};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return Internal(fmt::format("zmq_curve_keypair failed: {}", zmq_strerror(zmq_errno())));
  }
  return CurveKeyPair{pub, sec};
}

Status WriteCurveKeyPair(const std::string& dir, const std::string& name, const CurveKeyPair& keys) {
  if (!IsValidZ85Key(keys.public_key) || !IsValidZ85Key(keys.secret_key)) {
    return InvalidArgument("key pair for '" + name + "' is not two 40-character Z85 keys");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IOError("cannot create key directory " + dir + ": " + ec.message());
  fs::path pub = fs::path(dir) / (name + ".pub");
  fs::path key = fs::path(dir) / (name + ".key");
  {
    std::ofstream out(pub, std::ios::trunc);
    out << keys.public_key << "\n";
    if (!out) return IOError("cannot write " + pub.string());
  }
  {
    // Create with 0600 before writing the secret.
    std::ofstream out(key, std::ios::trunc);
    if (!out) return IOError("cannot write " + key.string());
    fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
    if (ec) return IOError("cannot set mode 0600 on " + key.string() + ": " + ec.message());
    out << "public " << keys.public_key << "\nsecret " << keys.secret_key << "\n";
    if (!out) return IOError("cannot write " + key.string());
  }
  return OkStatus();
}

StatusOr<CurveKeyPair> ReadCurveKeyPair(const std::string& key_path) {
  std::ifstream in(key_path);
  if (!in) return NotFound("cannot open key file " + key_path);
  CurveKeyPair kp;
  std::string word, value;
  int line = 0;
  while (in >> word >> value) {
    ++line;
    if (word == "public")
      kp.public_key = value;
    else if (word == "secret")
      kp.secret_key = value;
    else
      return InvalidArgument(fmt::format("{}:{}: expected 'public <key>' or 'secret <key>'", key_path, line));
  }
  if (!IsValidZ85Key(kp.public_key)) return InvalidArgument(key_path + ": missing or malformed public key");
  if (!IsValidZ85Key(kp.secret_key)) return InvalidArgument(key_path + ": missing or malformed secret key");
  return kp;
}

StatusOr<std::string> ReadCurvePublicKey(const std::string& pub_path) {
  std::ifstream in(pub_path);
  if (!in) return NotFound("cannot open public key file " + pub_path);
  std::string key;
  in >> key;
  if (!IsValidZ85Key(key)) return InvalidArgument(pub_path + ": not a 40-character Z85 public key");
  return key;
}

StatusOr<std::map<std::string, std::string>> ReadCurveAllowList(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("key directory " + dir + " does not exist");
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".pub") continue;
    LOFT_ASSIGN_OR_RETURN(std::string key, ReadCurvePublicKey(entry.path().string()));
    out[key] = entry.path().stem().string();
  }
  if (ec) return IOError("cannot list " + dir + ": " + ec.message());
  if (out.empty()) return NotFound("no *.pub files in key directory " + dir);
  return out;
}

bool IsLoopbackEndpoint(const std::string& ep) {
  if (ep.rfind("inproc://", 0) == 0 || ep.rfind("ipc://", 0) == 0) return true;
  if (ep.rfind("tcp://", 0) != 0) return false;
  std::string host = ep.substr(6);
  if (host.rfind("[::1]", 0) == 0) return true;
  auto colon = host.rfind(':');
  if (colon != std::string::npos) host = host.substr(0, colon);
  if (host == "localhost" || host == "::1") return true;
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) return false;
  return (ntohl(addr.s_addr) >> 24) == 127;
}

Status CheckInsecureAllowed(const std::vector<std::string>& endpoints) {
  for (const auto& ep : endpoints) {
    if (!IsLoopbackEndpoint(ep)) {
      return PermissionDenied("--insecure (no CURVE) is allowed only on loopback endpoints; '" + ep +
                              "' is not loopback");
    }
  }
  spdlog::warn(
      "INSECURE MODE: CURVE authentication is OFF; any local process can connect. "
      "Use only for loopback development.");
  return OkStatus();
}

StatusOr<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(
    zmq::context_t& ctx, std::map<std::string, std::string> allowed) {
  std::unique_ptr<ZapAuthenticator> auth(new ZapAuthenticator(std::move(allowed)));
  try {
    zmq::socket_t sock(ctx, zmq::socket_type::rep);
    sock.set(zmq::sockopt::linger, 0);
    sock.bind("inproc://zeromq.zap.01");
    auth->thread_ = std::thread([a = auth.get(), s = std::move(sock)]() mutable { a->Run(std::move(s)); });
  } catch (const zmq::error_t& e) {
    return Internal(fmt::format("cannot start the ZAP handler on inproc://zeromq.zap.01: {}", e.what()));
  }
  return auth;
}

namespace {
std::string SuppressedNote(int64_t dropped) {
  return dropped > 0 ? " (" + std::to_string(dropped) + " similar refusals not logged)" : "";
}
}  // namespace

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::Allow(const std::string& public_z85, const std::string& name) {
  std::lock_guard lock(mu_);
  allowed_[public_z85] = name;
}

void ZapAuthenticator::Run(zmq::socket_t sock) {
  // Refusals are counted (denied()); the log gets at most 10 lines per 10 s.
  LogRateLimiter log_limiter(10, std::chrono::seconds(10));
  try {
    while (!stop_) {
      zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) <= 0) continue;
      std::vector<zmq::message_t> req;
      do {
        zmq::message_t m;
        if (!sock.recv(m, zmq::recv_flags::none)) break;
        req.push_back(std::move(m));
      } while (req.back().more() && req.size() < 16);
      // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
      std::string version = req.size() > 0 ? req[0].to_string() : "";
      std::string request_id = req.size() > 1 ? req[1].to_string() : "";
      std::string address = req.size() > 3 ? req[3].to_string() : "";
      std::string mechanism = req.size() > 5 ? req[5].to_string() : "";
      std::string code = "400", text = "denied", user;
      if (version == "1.0" && mechanism == "CURVE" && req.size() >= 7 && req[6].size() == 32) {
        char z85[41] = {0};
        zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
        std::lock_guard lock(mu_);
        auto it = allowed_.find(z85);
        if (it != allowed_.end()) {
          code = "200";
          text = "OK";
          user = it->second;
        } else if (int64_t dropped = 0; log_limiter.Allow(std::chrono::steady_clock::now(), &dropped)) {
          spdlog::warn("ZAP: refused CURVE key {} from {}{}", z85, address, SuppressedNote(dropped));
        }
      } else if (int64_t dropped = 0; log_limiter.Allow(std::chrono::steady_clock::now(), &dropped)) {
        spdlog::warn("ZAP: refused {} handshake from {}{}", mechanism.empty() ? "malformed" : mechanism,
                     address, SuppressedNote(dropped));
      }
      (code == "200" ? accepted_ : denied_)++;
      std::array<std::string, 6> reply{"1.0", request_id, code, text, user, ""};
      for (size_t i = 0; i < reply.size(); ++i) {
        auto flags = i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        (void)sock.send(zmq::buffer(reply[i]), flags);
      }
    }
  } catch (const zmq::error_t& e) {
    // ETERM: the context is shutting down.
    if (e.num() != ETERM) spdlog::error("ZAP handler stopped: {}", e.what());
  }
}

}  // namespace loft
