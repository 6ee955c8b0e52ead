// The commands: what other threads ask of the ZeroMQ transport's I/O thread (zmq_transport.cc), which
// alone may touch the listener and set up or close connections. Queued under the transport's lock
// by any thread, executed in order by the I/O thread; each lives until executed.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ps/transport/transport.h"

namespace zps::zmq_io {

struct ListenCmd {
  std::string host;
  int port;
  std::shared_ptr<std::promise<StatusOr<int>>> done;
};
struct ConnectCmd {
  PeerId id;
  std::string endpoint;
  std::string password;  // PLAIN; "" = the transport's own
};
struct SendCmd {
  PeerId peer;
  std::vector<Blob> frames;
};
struct HandlerCmd {
  std::function<void(TransportMessage)> handler;
};
struct ForgetCmd {
  PeerId peer;
};
struct ReconnectHandlerCmd {
  std::function<void(PeerId)> handler;
};
struct DisconnectCmd {
  PeerId peer;
};
struct StopCmd {};

using Command =
    std::variant<ListenCmd, ConnectCmd, SendCmd, HandlerCmd, ForgetCmd, ReconnectHandlerCmd, DisconnectCmd, StopCmd>;

}  // namespace zps::zmq_io
