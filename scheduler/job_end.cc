#include "scheduler/job_end.h"

#include <glog/logging.h>

#include <algorithm>

#include "ps/wire/codec.h"

namespace zps {

JobEnd::JobEnd(int exit_code, const std::string& reason, std::set<PeerId> awaiting) : awaiting_(std::move(awaiting)) {
  shutdown_.mutable_shutdown()->set_exit_code(exit_code);
  shutdown_.mutable_shutdown()->set_reason(reason);
}

bool JobEnd::answer(PeerId peer, const pb::Control& c, const Membership& membership) {
  if (c.has_shutdown_ack() || c.has_goodbye()) {
    awaiting_.erase(peer);
    return false;
  }
  if (c.has_register_() && c.register_().rejoin()) {
    const pb::Register& reg = c.register_();
    const Member* m = membership.holder(reg.role(), reg.requested_rank());
    if (m != nullptr && m->peer != peer && isSameProcess(*m, reg) && awaiting_.erase(m->peer) > 0)
      awaiting_.insert(peer);
  }
  return true;
}

std::string JobEnd::waitingFor(const Membership& membership) const {
  std::string names;
  for (PeerId peer : awaiting_) {
    const Member* m = membership.find(peer);
    if (!names.empty()) names += ", ";
    names += m != nullptr ? m->describe() : "a node that registered again";
  }
  return names;
}

std::chrono::milliseconds JobEnd::lingerFor(std::chrono::milliseconds heartbeat_interval, bool signalled) {
  constexpr std::chrono::milliseconds kMinLinger{5000};
  const std::chrono::milliseconds linger = std::max(2 * heartbeat_interval, kMinLinger);
  return signalled ? std::min(linger, kSignalLinger) : linger;
}

void JobEnd::linger(Transport* transport, const Membership& membership, const wire::Limits& limits,
                    std::chrono::milliseconds linger_for) {
  const auto start = Clock::now();
  const auto deadline = start + linger_for;
  size_t answered = 0;
  while (!awaiting_.empty() && Clock::now() < deadline) {
    auto msg = transport->recv(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    if (!msg.ok()) continue;
    auto decoded = wire::decode(msg->frames, limits);
    const auto* control = decoded.ok() ? std::get_if<pb::Control>(&decoded.value()) : nullptr;
    if (control == nullptr || !answer(msg->peer, *control, membership)) continue;
    if (answered++ < 20)
      LOG(INFO) << "scheduler: told " << transport->describe(msg->peer) << " again that the job ended (it sent "
                << (control->has_register_() ? "a registration" : "a message") << " after the end)";
    (void)transport->send(msg->peer, wire::encodeControl(shutdown_));
  }
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  if (awaiting_.empty())
    LOG(INFO) << "scheduler: every node acknowledged the end of the job (" << waited << " s)";
  else
    LOG(WARNING) << "scheduler: " << waitingFor(membership) << " did not acknowledge the end of the job within "
                 << waited << " s; exiting anyway";
}

}  // namespace zps
