// Authentication of peers with a shared secret (ZPS_AUTH_TOKEN, or the file ZPS_AUTH_TOKEN_FILE names,
// e.g. a mounted Kubernetes Secret). The token never crosses the wire: a node proves it knows it with an
// HMAC-SHA256 over its registration (or HELLO) fields, a fresh random nonce and a timestamp; the
// scheduler (or server) checks the MAC, the clock skew and that the nonce was not seen before, and
// proves itself back with an HMAC over the node's nonce. The connection that passed is then bound to
// that node by the transport. Optionally (ZPS_CURVE=1) every connection is also encrypted with CurveZMQ,
// with key pairs derived from the same token.
//
// An Authenticator is immutable after creation; any thread may use it.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "proto/zps.pb.h"
#include "zps/status.h"

namespace zps {

struct Config;
class NonceCache;

class Authenticator {
 public:
  static constexpr int64_t kMaxClockSkewMs = 5 * 60 * 1000;
  // A token file longer than this is refused unread (ZPS_AUTH_TOKEN_FILE=/dev/zero would never end).
  static constexpr size_t kMaxTokenFileBytes = 4096;

  // Reads the token from the config; an Authenticator without a token accepts everyone.
  static StatusOr<Authenticator> fromConfig(const Config& config);
  static Authenticator withToken(std::string token);

  bool enabled() const { return !token_.empty(); }
  static std::string newNonce();
  static int64_t nowMs();
  // HMAC-SHA256(token, context || 0 || message), 32 bytes.
  std::string mac(std::string_view context, std::string_view message) const;
  // Constant-time comparison of the token itself with `presented` (the HTTP endpoint's bearer token).
  bool matchesToken(std::string_view presented) const;
  // Constant-time comparison of mac(context, message) with `claimed`.
  bool verify(std::string_view context, std::string_view message, std::string_view claimed) const;

  // CurveZMQ key pairs derived from the token (32-byte binary keys).
  struct KeyPair {
    std::string public_key, secret_key;
  };
  KeyPair curveServerKeys() const;
  KeyPair curveClientKeys() const;

 private:
  explicit Authenticator(std::string token) : token_(std::move(token)) {}
  std::string token_;
};

// The token in a token file (trailing line breaks and spaces removed), read up to kMaxTokenFileBytes.
StatusOr<std::string> readTokenFile(const std::string& path);
// The token this process's environment names (ZPS_AUTH_TOKEN_FILE, else ZPS_AUTH_TOKEN; "" for none),
// for tools that talk to a job's HTTP endpoint.
StatusOr<std::string> tokenFromEnvironment();

// What the MACs cover: every field a peer could want to change, length-prefixed so no two field lists
// give the same bytes.
std::string registerMacInput(const pb::Register& r);
std::string helloMacInput(const pb::Hello& hello, uint32_t protocol_version);
inline constexpr std::string_view kRegisterContext = "zps-register-v1";
inline constexpr std::string_view kRegisterReplyContext = "zps-register-reply-v1";
inline constexpr std::string_view kHelloContext = "zps-hello-v1";
inline constexpr std::string_view kHelloReplyContext = "zps-hello-reply-v1";
inline constexpr std::string_view kHandshakeContext = "zps-handshake-v1";
inline constexpr std::string_view kHttpTokenContext = "zps-http-token-v1";

// Checks a peer's MAC, clock skew and nonce freshness; the message says which check failed.
Status checkPeerProof(const Authenticator& auth, NonceCache& nonces, std::string_view context, const std::string& input,
                      const std::string& nonce, int64_t time_ms, const std::string& mac);

// Remembers recently seen nonces so a captured registration cannot be replayed. Owned by the
// scheduler's logic thread or a server's dispatcher thread.
class NonceCache {
 public:
  // False when the nonce was seen before.
  bool insert(const std::string& nonce);

 private:
  static constexpr size_t kMaxNonces = 1 << 16;
  std::unordered_set<std::string> seen_;
};

}  // namespace zps

namespace zps {
struct TransportOptions;
// Which connections a transport carries. The scheduler's link always uses CurveZMQ with a token:
// a PLAIN password is seen by anyone on the wire, and whoever replays it gets past the handshake,
// where libzmq then buffers every frame of a never-finished message without bound (a scheduler went
// from 17 to 645 MB). The link carries a few small messages a second, so encryption costs nothing
// there; data connections keep PLAIN unless ZPS_CURVE=1, for throughput.
enum class SecuredLink { kData, kScheduler };
// With a token, peers must prove it at the ZeroMQ handshake, before any of their messages is read:
// CurveZMQ keys when ZPS_CURVE=1 or on the scheduler's link, otherwise a PLAIN password derived from
// the token and `data_salt` (a server's listener passes its own salt; see dataHandshakePassword).
void applyTransportSecurity(const Config& config, const Authenticator& auth, TransportOptions* options,
                            SecuredLink link = SecuredLink::kData, std::string_view data_salt = {});
// The PLAIN password of a server's data connections: an HMAC of the token over the server's random
// salt (Register.data_salt, new in every server process, handed to the workers in the address book
// over the scheduler's CurveZMQ link). A password seen on the wire opens that server process only:
// no other server, no server of a later job with the same token.
std::string dataHandshakePassword(const Authenticator& auth, std::string_view data_salt);

// `bytes` as lowercase hex digits, two per byte (tokens, passwords and names made of random bytes).
std::string hexOf(std::string_view bytes);
}  // namespace zps
