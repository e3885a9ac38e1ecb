// CURVE authentication for loft sockets: key pairs, key files, and a ZAP
// handler enforcing an allow-list of client public keys.
//
// Key files (written by `loftctl keygen`, read by the daemons):
//   <dir>/<name>.pub  one line: the 40-character Z85 public key
//   <dir>/<name>.key  two lines: "public <Z85>" and "secret <Z85>" (mode 0600)
// The file stem is the identity's name (a node name or "scheduler"); a
// ZapAuthenticator reports it as the connection's ZeroMQ User-Id.
//
// ZapAuthenticator implements ZeroMQ's ZAP protocol (RFC 27) on
// inproc://zeromq.zap.01 in a thread it owns: a CURVE client whose public
// key is not in the allow-list fails its handshake and never reaches the
// server socket. It must be started before any CURVE server socket of the
// same context binds (libzmq accepts everyone while no handler exists).
//
// Not responsible for: which messages an authenticated peer may send
// (the services decide), key distribution.
// Thread-safety: ZapAuthenticator's public methods are thread-safe; free
// functions are stateless.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/status.h"

namespace loft {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// True if `key` is 40 Z85 characters that decode to 32 bytes.
bool IsValidZ85Key(const std::string& key);

StatusOr<CurveKeyPair> GenerateCurveKeyPair();
// Writes <dir>/<name>.pub and <dir>/<name>.key (creating dir).
Status WriteCurveKeyPair(const std::string& dir, const std::string& name, const CurveKeyPair& keys);
// Reads a .key file.
StatusOr<CurveKeyPair> ReadCurveKeyPair(const std::string& key_path);
// Reads a .pub file.
StatusOr<std::string> ReadCurvePublicKey(const std::string& pub_path);
// Every <name>.pub in `dir`: map public key (Z85) -> name. Errors on an
// unreadable or malformed file (naming it) and on an empty directory.
StatusOr<std::map<std::string, std::string>> ReadCurveAllowList(const std::string& dir);

// `--insecure` (no CURVE) is allowed only when every endpoint is local:
// inproc://, ipc://, or tcp:// on 127.0.0.0/8, localhost or [::1]. Returns
// PermissionDenied naming the first non-loopback endpoint.
Status CheckInsecureAllowed(const std::vector<std::string>& endpoints);
bool IsLoopbackEndpoint(const std::string& endpoint);

class ZapAuthenticator {
 public:
  // `allowed`: public key (Z85) -> name. Starts the handler thread.
  static StatusOr<std::unique_ptr<ZapAuthenticator>> Start(zmq::context_t& ctx,
                                                           std::map<std::string, std::string> allowed);
  ~ZapAuthenticator();  // stops and joins the thread
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  void Allow(const std::string& public_z85, const std::string& name);
  uint64_t accepted() const { return accepted_.load(); }
  uint64_t denied() const { return denied_.load(); }

 private:
  explicit ZapAuthenticator(std::map<std::string, std::string> allowed) : allowed_(std::move(allowed)) {}
  void Run(zmq::socket_t sock);

  std::mutex mu_;
  std::map<std::string, std::string> allowed_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> denied_{0};
  std::thread thread_;
};

}  // namespace loft
