#include "ps/node/scheduler_client.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>

#include "ps/node/observability.h"
#include "ps/node/resolve.h"
#include "ps/node/signals.h"
#include "ps/wire/codec.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

pb::Role toWireRole(Role r) {
  return r == Role::kServer ? pb::SERVER : r == Role::kWorker ? pb::WORKER : pb::SCHEDULER;
}

double seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }

}  // namespace

SchedulerClient::SchedulerClient(const Config& config, Authenticator auth, int listen_port, std::string data_salt)
    : config_(config), auth_(std::move(auth)), listen_port_(listen_port), data_salt_(std::move(data_salt)) {}

SchedulerClient::~SchedulerClient() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  bool leaving_early;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_early = reply_.has_value() && reply_->accepted() && !shutdown_.has_value();
  }
  if (transport_ && leaving_early) {
    // Tell the scheduler now instead of letting it wait out the heartbeat timeout.
    pb::Control bye;
    bye.mutable_goodbye()->set_reason(std::string(roleName(config_.role)) + " exited before the job ended");
    (void)sendControl(bye);
  }
  if (transport_) transport_->close();
}

Status SchedulerClient::sendControl(const pb::Control& c) {
  return transport_->send(scheduler_, wire::encodeControl(c));
}

pb::Control SchedulerClient::registration(bool rejoin) {
  pb::Control c;
  auto* reg = c.mutable_register_();
  reg->set_magic(wire::kMagic);
  reg->set_protocol_version(wire::kProtocolVersion);
  reg->set_role(toWireRole(config_.role));
  reg->set_host(config_.node_host);
  reg->set_port(static_cast<uint32_t>(listen_port_));
  reg->set_data_salt(data_salt_);
  reg->set_requested_rank(config_.requested_rank);
  reg->set_rank_source(config_.rank_source);
  reg->set_hostname(config_.hostname);
  reg->set_pid(static_cast<uint32_t>(getpid()));
  reg->set_expected_servers(static_cast<uint32_t>(config_.num_servers));
  reg->set_expected_workers(static_cast<uint32_t>(config_.num_workers));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (rejoin && reply_.has_value()) {
      reg->set_rejoin(true);
      reg->set_requested_rank(reply_->rank());
      reg->set_rank_source("the rank it held before registering again");
      // In a recovery, the generation it recovers into: a restarted scheduler goes on with the
      // recovery (its book is the nodes' cue) instead of sending the old generation's book again.
      const uint64_t generation =
          std::max(reply_->generation(), recovery_.has_value() ? recovery_->generation() : uint64_t{0});
      reg->set_generation(generation);
      for (uint64_t released : barrier_released_)
        reg->add_barriers_released(working_generation_ == generation ? released : 0);
    }
  }
  if (auth_.enabled()) {
    reg->set_auth_nonce(Authenticator::newNonce());
    reg->set_auth_time_ms(Authenticator::nowMs());
    reg->set_auth_mac(auth_.mac(kRegisterContext, registerMacInput(*reg)));
    std::lock_guard<std::mutex> lock(mu_);
    if (!rejoin && nonces_.size() < 64) nonces_.push_back(reg->auth_nonce());
  }
  return c;
}

StatusOr<pb::RegisterReply> SchedulerClient::start() {
  TransportOptions options;
  options.name = "scheduler-link";
  options.max_frame_bytes = 16 << 20;
  options.linger = config_.shutdown_linger;
  applyTransportSecurity(config_, auth_, &options, SecuredLink::kScheduler);
  transport_ = makeZmqTransport(options);
  transport_->onReconnect([this](PeerId) { reconnected_ = true; });
  ZPS_ASSIGN_OR_RETURN(
      scheduler_ip_, resolveWithRetry(config_.root_uri, config_.connect_timeout, "scheduler host (DMLC_PS_ROOT_URI)"));
  scheduler_address_ = config_.root_uri + ":" + std::to_string(config_.root_port);
  ZPS_ASSIGN_OR_RETURN(PeerId scheduler, transport_->connect(Endpoint::tcp(scheduler_ip_, config_.root_port)));
  scheduler_ = scheduler;

  ZPS_RETURN_IF_ERROR(sendControl(registration(false)));
  LOG(INFO) << roleName(config_.role) << " registering with scheduler " << scheduler_address_ << " (" << scheduler_ip_
            << "), advertising " << config_.node_host << ":" << listen_port_ << ", rank from " << config_.rank_source
            << (config_.requested_rank >= 0 ? " = " + std::to_string(config_.requested_rank) : "");
  last_heard_ = Clock::now();
  thread_ = std::thread([this] { loop(); });

  // The scheduler gives up after its rendezvous timeout and tells us why; we wait a little longer so its
  // report, not our own timeout, is what the user sees.
  auto wait = config_.rendezvous_timeout + config_.connect_timeout / 4 + std::chrono::seconds(5);
  auto give_up = Clock::now() + wait;
  std::unique_lock<std::mutex> lock(mu_);
  // In slices, to notice a scheduler that refused our handshake (wrong or missing token): it never replies.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(250),
                       [&] { return reply_.has_value() || shutdown_.has_value(); })) {
    if (std::string refused = transport_->handshakeFailure(scheduler_); !refused.empty())
      return FailedPrecondition("the scheduler at " + scheduler_address_ + " refused the connection: " + refused);
    if (Clock::now() < give_up) continue;
    return DeadlineExceeded(
        "no address book from scheduler " + scheduler_address_ + " after " +
        std::to_string(static_cast<int>(seconds(std::chrono::duration_cast<std::chrono::milliseconds>(wait)))) +
        " s; is the scheduler running there (DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT)?");
  }
  if (reply_.has_value()) {
    if (!reply_->accepted()) return FailedPrecondition("scheduler refused this node: " + reply_->error());
    working_generation_ = reply_->generation();
    // The registration the scheduler answered may be a repeat (the first was lost to a reset).
    bool proven = !auth_.enabled();
    for (const std::string& nonce : nonces_)
      proven = proven || auth_.verify(kRegisterReplyContext, nonce, reply_->auth_mac());
    if (!proven)
      return FailedPrecondition("the scheduler at " + scheduler_address_ +
                                " could not prove it knows ZPS_AUTH_TOKEN; refusing its address book");
    return *reply_;
  }
  return Aborted("scheduler ended the job during start-up: " + shutdown_->reason());
}

void SchedulerClient::rejoin(const std::string& why) {
  if (!rejoining_)
    LOG(WARNING) << roleName(config_.role) << ": registering again with " << scheduler_address_ << ": " << why;
  rejoining_ = true;
  next_rejoin_ = Clock::now() + config_.heartbeat_interval;
  (void)sendControl(registration(true));
}

void SchedulerClient::resendAfterRejoin() {
  std::vector<pb::Control> resend;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int g = pb::GROUP_WORKERS; g <= pb::GROUP_ALL; ++g) {
      if (barrier_sent_[g] <= barrier_released_[g]) continue;
      pb::Control c;
      c.mutable_barrier()->set_group(static_cast<pb::BarrierGroup>(g));
      c.mutable_barrier()->set_sequence(barrier_sent_[g]);
      c.mutable_barrier()->set_generation(working_generation_);
      resend.push_back(c);
    }
    if (finished_.has_value()) {
      pb::Control c;
      *c.mutable_finished() = *finished_;
      resend.push_back(c);
    }
  }
  LOG(INFO) << roleName(config_.role) << ": registered again with scheduler " << scheduler_address_ << "; sent again "
            << resend.size() << " messages it may have lost";
  for (const auto& c : resend) (void)sendControl(c);
}

bool SchedulerClient::seekScheduler(Clock::time_point now, Clock::time_point last) {
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last);
  if (silent > config_.heartbeat_timeout + config_.recovery_timeout) {
    pb::Shutdown s;
    s.set_exit_code(1);
    s.set_reason("scheduler " + scheduler_address_ + " has been silent for " +
                 std::to_string(static_cast<int>(seconds(silent))) + " s and did not come back within " +
                 std::to_string(static_cast<int>(seconds(config_.recovery_timeout))) + " s (ZPS_RECOVERY_TIMEOUT)");
    setShutdown(s);
    return false;
  }
  if (!seeking_) {
    seeking_ = true;
    next_seek_ = now;
    LOG(WARNING) << roleName(config_.role) << ": scheduler " << scheduler_address_ << " has been silent for "
                 << static_cast<int>(seconds(silent)) << " s (heartbeat timeout); ZPS_RECOVERY: waiting up to "
                 << static_cast<int>(seconds(config_.recovery_timeout))
                 << " s for a scheduler to come back (re-resolving DMLC_PS_ROOT_URI, registering again)";
  }
  if (now < next_seek_) return true;
  next_seek_ = now + config_.heartbeat_interval;
  // One quick attempt: the name of a restarting pod may not resolve for a while.
  auto ip = resolveWithRetry(config_.root_uri, std::chrono::milliseconds(1), "scheduler host (DMLC_PS_ROOT_URI)");
  if (ip.ok() && *ip != scheduler_ip_) {
    auto peer = transport_->connect(Endpoint::tcp(*ip, config_.root_port));
    if (peer.ok()) {
      LOG(WARNING) << roleName(config_.role) << ": scheduler " << config_.root_uri << " moved from " << scheduler_ip_
                   << " to " << *ip;
      transport_->disconnect(scheduler_);
      scheduler_ = *peer;
      scheduler_ip_ = *ip;
    }
  }
  rejoin("the scheduler went silent");
  return true;
}

void SchedulerClient::loop() {
  auto next_heartbeat = Clock::now();
  while (!stop_) {
    auto now = Clock::now();
    if (now >= next_heartbeat) {
      pb::Control hb;
      hb.mutable_heartbeat()->set_sent_unix_ms(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count());
      hb.mutable_heartbeat()->set_sent_unix_us(unixMicros());
      if (fill_heartbeat_) fill_heartbeat_(hb.mutable_heartbeat());
      (void)sendControl(hb);
      next_heartbeat = now + config_.heartbeat_interval;
    }
    if (terminationRequested()) {
      std::string reason = std::string(roleName(config_.role)) + " got signal " + std::to_string(terminationSignal()) +
                           " and is leaving";
      pb::Control bye;
      bye.mutable_goodbye()->set_reason(reason);
      (void)sendControl(bye);
      pb::Shutdown s;
      s.set_exit_code(0);
      s.set_reason("terminated by signal " + std::to_string(terminationSignal()));
      setShutdown(s);
      break;
    }
    bool registered;
    Clock::time_point last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      registered = reply_.has_value() && reply_->accepted();
      last = last_heard_;
      if (shutdown_.has_value()) break;
    }
    if (reconnected_.exchange(false)) {
      if (registered)
        rejoin("the connection to the scheduler was reset");
      else
        (void)sendControl(registration(false));  // the first may have been lost with the connection
    } else if (rejoining_ && now >= next_rejoin_) {
      rejoin("no answer to the last registration yet");
    }
    // Before registration completes the scheduler may simply not be up yet; start() bounds that wait.
    if (registered && now - last > config_.heartbeat_timeout && config_.recovery) {
      if (!seekScheduler(now, last)) break;
    } else if (registered && now - last > config_.heartbeat_timeout) {
      pb::Shutdown s;
      s.set_exit_code(1);
      s.set_reason("scheduler " + scheduler_address_ + " has been silent for " +
                   std::to_string(static_cast<int>(seconds(config_.heartbeat_timeout))) +
                   " s (heartbeat timeout); it is dead or unreachable (with ZPS_RECOVERY=1 nodes wait for a "
                   "restarted scheduler)");
      setShutdown(s);
      break;
    }
    auto msg = transport_->recv(std::min(next_heartbeat, now + std::chrono::milliseconds(200)));
    if (!msg.ok()) continue;
    auto decoded = wire::decode(msg->frames, wire::Limits{});
    if (!decoded.ok()) {
      LOG_EVERY_N(WARNING, 10) << "malformed message from scheduler: " << decoded.status().message();
      continue;
    }
    if (auto* control = std::get_if<pb::Control>(&decoded.value())) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_heard_ = Clock::now();
      }
      handle(*control);
    } else {
      LOG_EVERY_N(WARNING, 10) << "unexpected data message on the scheduler link";
    }
  }
}

void SchedulerClient::handle(const pb::Control& control) {
  switch (control.body_case()) {
    case pb::Control::kRegisterReply: {
      const auto& book = control.register_reply();
      bool answered_rejoin = false;
      bool newer = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!reply_.has_value()) {
          reply_ = book;
        } else if (reply_->accepted() && book.accepted()) {
          answered_rejoin = rejoining_;
          if (book.generation() > reply_->generation()) {
            newer = true;
            // The address book of a new generation (ZPS_RECOVERY); barriers count afresh once the
            // role moves to it (waitBook).
            std::string auth_mac = reply_->auth_mac();
            reply_ = book;
            reply_->set_auth_mac(auth_mac);
          }
        }
        cv_.notify_all();
      }
      if (newer) {
        // The scheduler announces a recovery before it sends its book, on the same connection: a book
        // that comes first means a reset lost the announcement, which the node still needs.
        pb::Recovery lost;
        lost.set_generation(book.generation());
        lost.set_lost("a node (its announcement was lost to a connection reset)");
        noteRecovery(lost);
      }
      if (rejoining_ && !book.accepted()) {
        pb::Shutdown s;
        s.set_exit_code(1);
        s.set_reason("the scheduler at " + scheduler_address_ +
                     " refused this node when it registered again: " + book.error());
        setShutdown(s);
      } else if (answered_rejoin) {
        rejoining_ = false;
        seeking_ = false;
        resendAfterRejoin();
      }
      break;
    }
    case pb::Control::kRecovery: noteRecovery(control.recovery()); break;
    case pb::Control::kBarrierRelease: {
      const auto& r = control.barrier_release();
      std::lock_guard<std::mutex> lock(mu_);
      auto g = static_cast<size_t>(r.group()) & 3;
      if (r.generation() != working_generation_) break;  // another generation's count
      if (r.sequence() > barrier_released_[g]) barrier_released_[g] = r.sequence();
      cv_.notify_all();
      break;
    }
    case pb::Control::kShutdown: {
      // Before the role sees it (and may exit): the scheduler waits for this acknowledgement.
      pb::Control ack;
      ack.mutable_shutdown_ack();
      (void)sendControl(ack);
      setShutdown(control.shutdown());
      break;
    }
    case pb::Control::kHeartbeat:  // the scheduler's echo: a sample for aligning trace clocks
      Tracer::get().clockSample(control.heartbeat().sent_unix_us(), control.heartbeat().scheduler_unix_us(),
                                unixMicros());
      break;
    default: LOG_EVERY_N(WARNING, 10) << "unexpected control message from the scheduler"; break;
  }
}

void SchedulerClient::noteRecovery(const pb::Recovery& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recovery_.has_value() && recovery_->generation() >= r.generation()) return;
    recovery_ = r;
  }
  LOG(WARNING) << roleName(config_.role) << ": the scheduler lost " << r.lost() << "; recovering (generation "
               << r.generation() << ")";
  if (on_recovery_) on_recovery_(r);
  std::lock_guard<std::mutex> lock(mu_);
  announced_generation_ = std::max(announced_generation_, r.generation());
  cv_.notify_all();
}

void SchedulerClient::setShutdown(pb::Shutdown s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_.has_value()) return;
    shutdown_ = s;
    cv_.notify_all();
  }
  if (on_shutdown_) on_shutdown_(s);
}

Status SchedulerClient::barrier(pb::BarrierGroup group, std::chrono::milliseconds timeout) {
  auto g = static_cast<size_t>(group) & 3;
  uint64_t seq, generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = working_generation_;
    if (announced_generation_ > generation)
      return Unavailable("recovering: a barrier of generation " + std::to_string(generation) + ", and generation " +
                         std::to_string(announced_generation_) + " has begun (the scheduler lost " + recovery_->lost() +
                         "); recover, then enter the barrier again");
    seq = ++barrier_sent_[g];
  }
  pb::Control c;
  c.mutable_barrier()->set_group(group);
  c.mutable_barrier()->set_sequence(seq);
  c.mutable_barrier()->set_generation(generation);
  ZPS_RETURN_IF_ERROR(sendControl(c));
  std::unique_lock<std::mutex> lock(mu_);
  auto recovering = [&] { return announced_generation_ > generation; };
  if (!cv_.wait_for(lock, timeout,
                    [&] { return barrier_released_[g] >= seq || shutdown_.has_value() || recovering(); }))
    return DeadlineExceeded("barrier " + std::to_string(seq) + " of group " + pb::BarrierGroup_Name(group) +
                            " not released after " + std::to_string(static_cast<int>(seconds(timeout))) + " s");
  if (barrier_released_[g] >= seq) return Status::OK();
  if (shutdown_.has_value()) return Aborted("job shut down during a barrier: " + shutdown_->reason());
  return Unavailable("recovering during a barrier: the scheduler lost " + recovery_->lost());
}

uint64_t SchedulerClient::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reply_.has_value() ? reply_->generation() : 0;
}

StatusOr<pb::RegisterReply> SchedulerClient::waitBook(uint64_t generation, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout,
                    [&] { return shutdown_.has_value() || (reply_.has_value() && reply_->generation() > generation); }))
    return DeadlineExceeded("no address book of a generation after " + std::to_string(generation) + " from scheduler " +
                            scheduler_address_ + " within " + std::to_string(static_cast<int>(seconds(timeout))) +
                            " s");
  if (shutdown_.has_value()) return Aborted("job ended by the scheduler while recovering: " + shutdown_->reason());
  if (reply_->generation() > working_generation_) {
    working_generation_ = reply_->generation();
    for (auto& n : barrier_sent_) n = 0;
    for (auto& n : barrier_released_) n = 0;
  }
  return *reply_;
}

StatusOr<pb::Shutdown> SchedulerClient::finish(bool ok, const std::string& message, std::chrono::milliseconds timeout) {
  pb::Control c;
  c.mutable_finished()->set_ok(ok);
  c.mutable_finished()->set_message(message.substr(0, 2000));
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = c.finished();
  }
  ZPS_RETURN_IF_ERROR(sendControl(c));
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return shutdown_.has_value(); }))
    return DeadlineExceeded("scheduler " + scheduler_address_ + " did not end the job within " +
                            std::to_string(static_cast<int>(seconds(timeout))) + " s of this worker finishing");
  return *shutdown_;
}

pb::Shutdown SchedulerClient::waitShutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return shutdown_.has_value(); });  // bounded: loop() synthesizes one on silence
  return *shutdown_;
}

std::optional<pb::Shutdown> SchedulerClient::shutdown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

}  // namespace zps
