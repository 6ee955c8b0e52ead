#include "ps/transport/zmq/handshake_guard.h"

#include <glog/logging.h>

#include <cstring>
#include <sstream>

namespace zps {
namespace {

constexpr int kHandshakeEvents =
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
// A client also watches its connection go and come back.
constexpr int kClientEvents = kHandshakeEvents | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;
constexpr const char* kZapDomain = "zps";
constexpr const char* kPlainUser = "zps";
// A client takes this many handshakes that the peer closed without a reason as a refusal.
constexpr int kUnexplainedClosesToFail = 3;

// A comparison whose time does not depend on where the strings differ.
bool sameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// One whole multi-part message, or an empty vector when none is waiting.
std::vector<std::string> recvAll(void* socket) {
  std::vector<std::string> frames;
  int more = 0;
  do {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, socket, frames.empty() ? ZMQ_DONTWAIT : 0) < 0) {
      zmq_msg_close(&m);
      return frames;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  } while (more != 0 && frames.size() < 64);
  return frames;
}

void* monitorPair(void* ctx, void* socket, const std::string& endpoint, int events) {
  if (zmq_socket_monitor(socket, endpoint.c_str(), events) != 0) return nullptr;
  void* pair = zmq_socket(ctx, ZMQ_PAIR);
  int linger = 0;
  zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof(linger));
  if (zmq_connect(pair, endpoint.c_str()) != 0) {
    zmq_close(pair);
    return nullptr;
  }
  return pair;
}

struct MonitorEvent {
  uint16_t event = 0;
  uint32_t value = 0;
};

bool parseEvent(const std::vector<std::string>& frames, MonitorEvent* e) {
  if (frames.empty() || frames[0].size() < 6) return false;
  std::memcpy(&e->event, frames[0].data(), 2);
  std::memcpy(&e->value, frames[0].data() + 2, 4);
  return true;
}

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

}  // namespace

HandshakeGuard::HandshakeGuard(void* ctx, std::string name, HandshakeCredentials credentials)
    : ctx_(ctx), name_(std::move(name)), credentials_(std::move(credentials)) {}

void HandshakeGuard::closeSockets() {
  if (zap_ != nullptr) zmq_close(zap_);
  if (listener_monitor_ != nullptr) zmq_close(listener_monitor_);
  for (auto& [peer, monitor] : client_monitors_) zmq_close(monitor);
  zap_ = listener_monitor_ = nullptr;
  client_monitors_.clear();
  descriptors_.clear();
}

// A socket's pipe tells the socket's ZMQ_FD of a new message only once the socket found that pipe
// empty: a monitor's pipe is attached when it connects, without a command that wakes anyone, so a
// new socket is read at once, or its events would wait unseen.
void HandshakeGuard::readNewSockets() { handleReady(); }

void HandshakeGuard::refreshDescriptors() {
  descriptors_.clear();
  auto add = [this](void* socket) {
    int fd = -1;
    size_t len = sizeof(fd);
    if (socket != nullptr && zmq_getsockopt(socket, ZMQ_FD, &fd, &len) == 0) descriptors_.push_back(fd);
  };
  add(zap_);
  add(listener_monitor_);
  for (const auto& [peer, monitor] : client_monitors_) add(monitor);
}

Status HandshakeGuard::prepareListener(void* router) {
  bool curve = !credentials_.curve_server_secret.empty();
  bool plain = !curve && !credentials_.plain_password.empty();
  if (curve) {
    int on = 1;
    zmq_setsockopt(router, ZMQ_CURVE_SERVER, &on, sizeof(on));
    zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, credentials_.curve_server_secret.data(),
                   credentials_.curve_server_secret.size());
  } else if (plain) {
    int on = 1;
    zmq_setsockopt(router, ZMQ_PLAIN_SERVER, &on, sizeof(on));
  }
  if (curve || plain) {
    zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, kZapDomain, std::strlen(kZapDomain));
    zap_ = zmq_socket(ctx_, ZMQ_REP);
    int linger = 0;
    zmq_setsockopt(zap_, ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_bind(zap_, "inproc://zeromq.zap.01") != 0)
      return InternalError(name_ + ": cannot answer handshakes (ZAP): " + zmq_strerror(zmq_errno()));
  }
  listener_monitor_ = monitorPair(ctx_, router, "inproc://zps-guard-listener", kHandshakeEvents);
  if (listener_monitor_ == nullptr) LOG(WARNING) << name_ << ": cannot watch handshakes: " << zmq_strerror(zmq_errno());
  refreshDescriptors();
  readNewSockets();
  return Status::OK();
}

void HandshakeGuard::prepareClient(void* dealer, uint64_t peer, const std::string& endpoint,
                                   const std::string& password) {
  endpoints_[peer] = endpoint;
  if (!credentials_.curve_server_public.empty()) {
    zmq_setsockopt(dealer, ZMQ_CURVE_SERVERKEY, credentials_.curve_server_public.data(),
                   credentials_.curve_server_public.size());
    zmq_setsockopt(dealer, ZMQ_CURVE_PUBLICKEY, credentials_.curve_client_public.data(),
                   credentials_.curve_client_public.size());
    zmq_setsockopt(dealer, ZMQ_CURVE_SECRETKEY, credentials_.curve_client_secret.data(),
                   credentials_.curve_client_secret.size());
  } else if (!credentials_.plain_password.empty()) {
    const std::string& plain = password.empty() ? credentials_.plain_password : password;
    zmq_setsockopt(dealer, ZMQ_PLAIN_USERNAME, kPlainUser, std::strlen(kPlainUser));
    zmq_setsockopt(dealer, ZMQ_PLAIN_PASSWORD, plain.data(), plain.size());
  }
  void* monitor = monitorPair(ctx_, dealer, "inproc://zps-guard-client-" + std::to_string(peer), kClientEvents);
  if (monitor != nullptr) client_monitors_[peer] = monitor;
  refreshDescriptors();
  readNewSockets();
}

void HandshakeGuard::forgetClient(uint64_t peer) {
  auto it = client_monitors_.find(peer);
  if (it == client_monitors_.end()) return;
  zmq_close(it->second);
  client_monitors_.erase(it);
  handshakes_.erase(peer);
  unexplained_closes_.erase(peer);
  endpoints_.erase(peer);
  refreshDescriptors();
}

void HandshakeGuard::handleReady() {
  if (zap_ != nullptr) answerZap();
  if (listener_monitor_ != nullptr) readListenerEvents();
  for (const auto& [peer, monitor] : client_monitors_) readClientEvents(peer, monitor);
}

std::string HandshakeGuard::clientFailure(uint64_t peer) const {
  std::lock_guard<std::mutex> lock(failures_mu_);
  auto it = client_failures_.find(peer);
  return it == client_failures_.end() ? "" : it->second;
}

void HandshakeGuard::refuse(const std::string& who, const std::string& why) {
  ++refused_;
  if (!refusal_log_.allow()) return;
  LOG(WARNING) << name_ << ": refused a node" << who << " at the handshake: " << why << " (" << refused_.load()
               << " refused so far"
               << (refusal_log_.suppressed() > 0
                       ? ", " + std::to_string(refusal_log_.suppressed()) + " of them not logged"
                       : std::string())
               << ")";
}

// ZAP (ZeroMQ RFC 27): request = version, request id, domain, address, routing id, mechanism,
// credentials...; reply = version, request id, status code, status text, user id, metadata.
void HandshakeGuard::answerZap() {
  for (;;) {
    std::vector<std::string> req = recvAll(zap_);
    if (req.empty()) return;
    bool ok = false;
    std::string why = "malformed ZAP request";
    if (req.size() >= 6) {
      const std::string& mechanism = req[5];
      if (mechanism == "PLAIN" && req.size() >= 8) {
        ok = req[6] == kPlainUser && sameSecret(req[7], credentials_.plain_password);
        why = "wrong " + credentials_.credential_name;
      } else if (mechanism == "CURVE" && req.size() >= 7) {
        ok = sameSecret(req[6], credentials_.curve_client_public);
        why = "wrong " + credentials_.credential_name + " (CurveZMQ key)";
      } else {
        why = "mechanism " + mechanism + " is not accepted";
      }
      if (!ok) refuse(" from " + req[3], why);
    }
    std::string request_id = req.size() >= 2 ? req[1] : "";
    std::vector<std::string> reply = {"1.0", request_id, ok ? "200" : "400", ok ? "OK" : "refused", "", ""};
    for (size_t i = 0; i < reply.size(); ++i)
      zmq_send(zap_, reply[i].data(), reply[i].size(), i + 1 < reply.size() ? ZMQ_SNDMORE : 0);
  }
}

void HandshakeGuard::readListenerEvents() {
  for (;;) {
    std::vector<std::string> frames = recvAll(listener_monitor_);
    if (frames.empty()) return;
    MonitorEvent e;
    if (!parseEvent(frames, &e)) continue;
    // Refusals by ZAP were counted when they were answered.
    if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    bool has_credentials = !credentials_.plain_password.empty() || !credentials_.curve_server_secret.empty();
    const std::string& token = credentials_.credential_name;
    if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)  // it left, or its handshake deadline passed
      refuse("", std::string(has_credentials ? "authentication required: " : "") +
                     "the connection ended during the handshake (" + std::strerror(static_cast<int>(e.value)) + ")");
    else if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
      refuse("", has_credentials ? "authentication required (it sent no " + token + ")"
                                 : "it uses " + token + " but this node runs without one");
    else if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)  // CurveZMQ keys of another token
      refuse("", "wrong " + token + " (its CurveZMQ keys do not match this node's)");
    else
      refuse("", "ZeroMQ handshake failed (protocol error " + hex(e.value) + ")");
  }
}

void HandshakeGuard::readClientEvents(uint64_t peer, void* monitor) {
  for (;;) {
    std::vector<std::string> frames = recvAll(monitor);
    if (frames.empty()) return;
    MonitorEvent e;
    if (!parseEvent(frames, &e)) continue;
    const std::string& token = credentials_.credential_name;
    bool has_credentials = !credentials_.plain_password.empty() || !credentials_.curve_client_public.empty();
    std::string mismatch = has_credentials ? "it runs without " + token + " or with another one (a wrong " + token +
                                                 " here or there), so it could not prove it knows " + token
                                           : "authentication required: set the job's " + token + " on this node";
    std::string why;
    if (e.event == ZMQ_EVENT_DISCONNECTED) {  // also at every job's end: said at PS_VERBOSE=1 only
      VLOG(1) << name_ << ": lost the connection to " << endpoints_[peer] << "; ZeroMQ reconnects";
      continue;
    }
    if (e.event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      unexplained_closes_.erase(peer);
      if (++handshakes_[peer] > 1) {
        if (connection_log_.allow())
          LOG(WARNING) << name_ << ": the connection to " << endpoints_[peer] << " was lost and is back (reconnect "
                       << handshakes_[peer] - 1 << "); resending what it had in flight";
        if (on_reconnect_) on_reconnect_(peer);
      }
      continue;
    }
    if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      why = "it refused this node's " + token + " (wrong " + token + ")";
    } else if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      // The peer closed the connection mid-handshake: it saw a mechanism it does not speak, or it was
      // restarting. Only a repeat is taken as a refusal.
      if (++unexplained_closes_[peer] < kUnexplainedClosesToFail) continue;
      why = mismatch + " (it closed the connection during the handshake " + std::to_string(kUnexplainedClosesToFail) +
            " times: " + std::strerror(static_cast<int>(e.value)) + ")";
    } else if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      why = mismatch;
    } else {
      why = "ZeroMQ handshake failed (protocol error " + hex(e.value) + ")";
    }
    std::lock_guard<std::mutex> lock(failures_mu_);
    client_failures_[peer] = why;
  }
}

}  // namespace zps
