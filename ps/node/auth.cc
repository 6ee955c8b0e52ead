#include "ps/node/auth.h"

#include <sodium.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "ps/common/checkpoint.h"
#include "ps/common/config.h"
#include "ps/common/regular_file.h"
#include "ps/common/settings.h"

namespace zps {
namespace {

void ensureSodium() {
  static const bool ready = sodium_init() >= 0;
  (void)ready;
}

std::string deriveSeed(const std::string& token, std::string_view label) {
  ensureSodium();
  std::string input = std::string(label) + ":" + token;
  unsigned char seed[crypto_box_SEEDBYTES];
  crypto_generichash(seed, sizeof(seed), reinterpret_cast<const unsigned char*>(input.data()), input.size(), nullptr,
                     0);
  return std::string(reinterpret_cast<char*>(seed), sizeof(seed));
}

Authenticator::KeyPair keysFrom(const std::string& seed) {
  unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
  crypto_box_seed_keypair(pk, sk, reinterpret_cast<const unsigned char*>(seed.data()));
  return {std::string(reinterpret_cast<char*>(pk), sizeof(pk)), std::string(reinterpret_cast<char*>(sk), sizeof(sk))};
}

}  // namespace

StatusOr<Authenticator> Authenticator::fromConfig(const Config& config) {
  if (!config.auth_token_file.empty()) {
    ZPS_ASSIGN_OR_RETURN(std::string token, readTokenFile(config.auth_token_file));
    if (token.size() < 16)
      return InvalidArgument("ZPS_AUTH_TOKEN_FILE=" + config.auth_token_file +
                             " holds a token shorter than 16 characters; use a long random secret");
    return Authenticator(token);
  }
  if (!config.auth_token.empty() && config.auth_token.size() < 16)
    return InvalidArgument("ZPS_AUTH_TOKEN is shorter than 16 characters; use a long random secret");
  if (config.curve && config.auth_token.empty())
    return InvalidArgument("ZPS_CURVE=1 needs ZPS_AUTH_TOKEN or ZPS_AUTH_TOKEN_FILE to derive its keys from");
  return Authenticator(config.auth_token);
}

StatusOr<std::string> readTokenFile(const std::string& path) {
  // A folder, FIFO or device is refused unread: a FIFO without a writer would block the start forever.
  // Every refusal, a missing file included, is the user's to fix: InvalidArgument (exit code 2).
  StatusOr<int> opened = openRegularFile("ZPS_AUTH_TOKEN_FILE=", path);
  if (!opened.ok()) return InvalidArgument(opened.status().message());
  const int fd = *opened;
  // Read one byte past the limit, never more: the file may be huge.
  std::string token(Authenticator::kMaxTokenFileBytes + 1, '\0');
  size_t got = 0;
  while (got < token.size()) {
    const ssize_t n = ::read(fd, token.data() + got, token.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  token.resize(got);
  if (token.size() > Authenticator::kMaxTokenFileBytes)
    return InvalidArgument("ZPS_AUTH_TOKEN_FILE=" + path + " holds more than " +
                           std::to_string(Authenticator::kMaxTokenFileBytes) + " bytes; it must hold one token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

StatusOr<std::string> tokenFromEnvironment() {
  const EnvLookup env = processEnv();
  ZPS_ASSIGN_OR_RETURN(std::string file, readText(env, settings::kAuthTokenFile));
  if (!file.empty()) return readTokenFile(file);
  return readText(env, settings::kAuthToken);
}

Authenticator Authenticator::withToken(std::string token) { return Authenticator(std::move(token)); }

std::string Authenticator::newNonce() {
  ensureSodium();
  std::string nonce(16, '\0');
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

int64_t Authenticator::nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Authenticator::mac(std::string_view context, std::string_view message) const {
  ensureSodium();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(token_.data()), token_.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(context.data()), context.size());
  const unsigned char zero = 0;
  crypto_auth_hmacsha256_update(&st, &zero, 1);
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(message.data()), message.size());
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

bool Authenticator::verify(std::string_view context, std::string_view message, std::string_view claimed) const {
  std::string expected = mac(context, message);
  if (claimed.size() != expected.size()) return false;
  return sodium_memcmp(expected.data(), claimed.data(), expected.size()) == 0;
}

bool Authenticator::matchesToken(std::string_view presented) const {
  // Compare MACs of both, so that the time taken depends on neither length.
  return enabled() && verify(kHttpTokenContext, presented, mac(kHttpTokenContext, token_));
}

Authenticator::KeyPair Authenticator::curveServerKeys() const {
  return keysFrom(deriveSeed(token_, "zps-curve-server"));
}
Authenticator::KeyPair Authenticator::curveClientKeys() const {
  return keysFrom(deriveSeed(token_, "zps-curve-client"));
}

bool NonceCache::insert(const std::string& nonce) {
  if (seen_.size() >= kMaxNonces) seen_.clear();  // old nonces also fail the clock-skew check
  return seen_.insert(nonce).second;
}

std::string registerMacInput(const pb::Register& r) {
  PayloadWriter w;
  auto str = [&](const std::string& v) {
    w.put(static_cast<uint32_t>(v.size()));
    w.putBytes(v.data(), v.size());
  };
  w.put(static_cast<int32_t>(r.role()));
  str(r.host());
  w.put(r.port());
  w.put(r.requested_rank());
  str(r.rank_source());
  str(r.hostname());
  w.put(r.pid());
  w.put(r.expected_servers());
  w.put(r.expected_workers());
  str(r.auth_nonce());
  w.put(r.auth_time_ms());
  w.put(static_cast<uint32_t>(r.rejoin() ? 1 : 0));
  w.put(r.generation());
  w.put(static_cast<uint32_t>(r.barriers_released_size()));
  for (uint64_t n : r.barriers_released()) w.put(n);
  str(r.data_salt());
  return w.take();
}

std::string helloMacInput(const pb::Hello& hello, uint32_t protocol_version) {
  PayloadWriter w;
  w.put(hello.worker_rank());
  w.put(protocol_version);
  w.put(static_cast<uint32_t>(hello.auth_nonce().size()));
  w.putBytes(hello.auth_nonce().data(), hello.auth_nonce().size());
  w.put(hello.auth_time_ms());
  // A lane HELLO's token is signed too, so a captured token cannot be put in another HELLO.
  if (hello.lane_token() != 0) w.put(hello.lane_token());
  return w.take();
}

Status checkPeerProof(const Authenticator& auth, NonceCache& nonces, std::string_view context, const std::string& input,
                      const std::string& nonce, int64_t time_ms, const std::string& mac) {
  if (mac.empty()) return FailedPrecondition("authentication required: set the job's ZPS_AUTH_TOKEN on this node");
  if (nonce.size() < 16) return FailedPrecondition("authentication failed: nonce too short");
  if (!auth.verify(context, input, mac)) return FailedPrecondition("authentication failed: wrong ZPS_AUTH_TOKEN");
  int64_t skew = Authenticator::nowMs() - time_ms;
  if (skew > Authenticator::kMaxClockSkewMs || skew < -Authenticator::kMaxClockSkewMs)
    return FailedPrecondition("authentication failed: clocks differ by " + std::to_string(skew / 1000) + " s");
  if (!nonces.insert(nonce)) return FailedPrecondition("authentication failed: replayed nonce");
  return Status::OK();
}

}  // namespace zps

#include "ps/transport/transport.h"

namespace zps {

std::string dataHandshakePassword(const Authenticator& auth, std::string_view data_salt) {
  // A MAC of the token, not the token: PLAIN sends its password in clear text, and one seen on the
  // wire only lets a peer past that one server's handshake, not register (that needs the token's
  // HMAC proof).
  return hexOf(auth.mac(kHandshakeContext, data_salt));
}

std::string hexOf(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char ch : bytes) {
    hex += kHex[ch >> 4];
    hex += kHex[ch & 15];
  }
  return hex;
}

void applyTransportSecurity(const Config& config, const Authenticator& auth, TransportOptions* options,
                            SecuredLink link, std::string_view data_salt) {
  options->credential_name = "ZPS_AUTH_TOKEN";
  if (!auth.enabled()) return;
  if (!config.curve && link == SecuredLink::kData) {
    options->handshake_password = dataHandshakePassword(auth, data_salt);
    return;
  }
  Authenticator::KeyPair server = auth.curveServerKeys();
  Authenticator::KeyPair client = auth.curveClientKeys();
  options->curve_server_secret = server.secret_key;
  options->curve_server_public = server.public_key;
  options->curve_client_public = client.public_key;
  options->curve_client_secret = client.secret_key;
}

}  // namespace zps
