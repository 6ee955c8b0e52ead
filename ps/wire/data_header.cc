// The in-memory header of each body (ps/wire/data_codec.h): which DataHeader fields a command's body
// carries, in both directions, stated here once.
#include "ps/wire/data_codec.h"

namespace zps::wire::detail {
namespace {

pb::DataCommand tensorCommand(pb::TensorOp op) {
  switch (op) {
    case pb::OP_PUSH: return pb::CMD_PUSH;
    case pb::OP_PULL: return pb::CMD_PULL;
    case pb::OP_PUSH_PULL: return pb::CMD_PUSH_PULL;
    default: return pb::CMD_UNSPECIFIED;
  }
}

// The in-memory header has one REPLY command for three answers; the fields its sender set say which
// body carries it (a HELLO's answer always sets accepts_fused, a STATS answer its totals).
bool isHelloReply(const pb::DataHeader& h) {
  return h.accepts_fused() || !h.auth_mac().empty() || !h.ipc_name().empty() || h.upgrade_token() != 0 ||
         h.lane_token() != 0;
}

bool isStatsReply(const pb::DataHeader& h) {
  return h.stats_cpu_ns() != 0 || h.stats_peak_rss_bytes() != 0 || h.stats_pushed_bytes() != 0 ||
         h.stats_summed_bytes() != 0 || h.stats_sum_ns() != 0;
}

}  // namespace

void toHeader(const pb::Data& d, pb::DataHeader* h) {
  h->set_request_id(d.request_id());
  h->set_generation(d.generation());
  switch (d.body_case()) {
    case pb::Data::kHello: {
      const pb::Hello& b = d.hello();
      h->set_command(pb::CMD_HELLO);
      h->set_protocol_version(d.protocol_version());
      h->set_magic(b.magic());
      h->set_worker_rank(b.worker_rank());
      h->set_local_rank(b.local_rank());
      h->set_auth_nonce(b.auth_nonce());
      h->set_auth_time_ms(b.auth_time_ms());
      h->set_auth_mac(b.auth_mac());
      h->set_upgrade_token(b.upgrade_token());
      h->set_lane_token(b.lane_token());
      return;
    }
    case pb::Data::kHelloReply: {
      const pb::HelloReply& b = d.hello_reply();
      h->set_command(pb::CMD_REPLY);
      h->set_auth_mac(b.auth_mac());
      h->set_ipc_name(b.ipc_name());
      h->set_upgrade_token(b.upgrade_token());
      h->set_lane_token(b.lane_token());
      h->set_accepts_fused(b.accepts_fused());
      return;
    }
    case pb::Data::kDeclare: {
      const pb::Declare& b = d.declare();
      h->set_command(pb::CMD_DECLARE);
      h->set_key(b.key());
      h->set_mode(b.mode());
      h->set_dtype(b.dtype());
      h->set_num_elements(b.num_elements());
      h->set_name(b.name());
      h->set_async(b.async());
      h->set_row_dim(b.row_dim());
      if (b.has_optimizer()) *h->mutable_optimizer() = b.optimizer();
      h->set_restore_step(b.restore_step());
      h->set_local_size(b.local_size());
      h->set_contributors(b.contributors());
      return;
    }
    case pb::Data::kTensor: {
      const pb::Tensor& b = d.tensor();
      h->set_command(tensorCommand(b.op()));
      h->set_key(b.key());
      h->set_round(b.round());
      h->set_dtype(b.dtype());
      h->set_num_elements(b.num_elements());
      h->set_encoding(b.encoding());
      h->set_sparse_count(b.sparse_count());
      h->set_received_through(b.received_through());
      h->set_push_seq(b.push_seq());
      h->set_wants_awaited(b.wants_awaited());
      h->set_holds_credit(b.holds_credit());
      return;
    }
    case pb::Data::kRows: {
      const pb::Rows& b = d.rows();
      h->set_command(b.push() ? pb::CMD_PUSH_ROWS : pb::CMD_PULL_ROWS);
      h->set_key(b.key());
      h->set_round(b.round());
      h->set_dtype(static_cast<uint32_t>(DType::kFloat32));
      h->set_num_elements(b.count());
      h->set_row_dim(b.row_dim());
      h->set_push_seq(b.push_seq());
      return;
    }
    case pb::Data::kCheckpoint:
      h->set_command(pb::CMD_CHECKPOINT);
      h->set_key(d.checkpoint().key());
      h->set_round(d.checkpoint().step());
      return;
    case pb::Data::kStats: h->set_command(pb::CMD_STATS); return;
    case pb::Data::kStatsReply: {
      const pb::StatsReply& b = d.stats_reply();
      h->set_command(pb::CMD_REPLY);
      h->set_stats_cpu_ns(b.cpu_ns());
      h->set_stats_peak_rss_bytes(b.peak_rss_bytes());
      h->set_stats_pushed_bytes(b.pushed_bytes());
      h->set_stats_summed_bytes(b.summed_bytes());
      h->set_stats_sum_ns(b.sum_ns());
      return;
    }
    case pb::Data::kReply: {
      const pb::Reply& b = d.reply();
      h->set_command(pb::CMD_REPLY);
      h->set_key(b.key());
      h->set_round(b.round());
      h->set_dtype(b.dtype());
      h->set_num_elements(b.num_elements());
      *h->mutable_awaited() = b.awaited();
      return;
    }
    case pb::Data::kError: {
      const pb::Error& b = d.error();
      h->set_command(pb::CMD_ERROR);
      h->set_key(b.key());
      h->set_round(b.round());
      h->set_error(b.text());
      h->set_recovering(b.recovering());
      h->set_user_error(b.user_error());
      return;
    }
    case pb::Data::kFused:
      h->set_command(pb::CMD_FUSED);
      // Capped before anything is copied: a refused message's header lists its entries for the answers.
      if (static_cast<size_t>(d.fused().entries_size()) > kMaxFusedEntries) return;
      for (const pb::Data& e : d.fused().entries()) toHeader(e, h->add_entries());
      return;
    case pb::Data::BODY_NOT_SET: h->set_command(pb::CMD_UNSPECIFIED); return;
  }
}

pb::Data fromHeader(const pb::DataHeader& h) {
  pb::Data d;
  d.set_protocol_version(h.command() == pb::CMD_HELLO ? h.protocol_version() : kProtocolVersion);
  d.set_request_id(h.request_id());
  d.set_generation(h.generation());
  switch (h.command()) {
    case pb::CMD_HELLO: {
      pb::Hello* b = d.mutable_hello();
      b->set_magic(h.magic());
      b->set_worker_rank(h.worker_rank());
      b->set_local_rank(h.local_rank());
      b->set_auth_nonce(h.auth_nonce());
      b->set_auth_time_ms(h.auth_time_ms());
      b->set_auth_mac(h.auth_mac());
      b->set_upgrade_token(h.upgrade_token());
      b->set_lane_token(h.lane_token());
      break;
    }
    case pb::CMD_DECLARE: {
      pb::Declare* b = d.mutable_declare();
      b->set_key(h.key());
      b->set_mode(h.mode());
      b->set_dtype(h.dtype());
      b->set_num_elements(h.num_elements());
      b->set_name(h.name());
      b->set_async(h.async());
      b->set_row_dim(h.row_dim());
      if (h.has_optimizer()) *b->mutable_optimizer() = h.optimizer();
      b->set_restore_step(h.restore_step());
      b->set_local_size(h.local_size());
      b->set_contributors(h.contributors());
      break;
    }
    case pb::CMD_PUSH:
    case pb::CMD_PULL:
    case pb::CMD_PUSH_PULL: {
      pb::Tensor* b = d.mutable_tensor();
      b->set_op(tensorOp(h.command()));
      b->set_key(h.key());
      b->set_round(h.round());
      b->set_dtype(h.dtype());
      b->set_num_elements(h.num_elements());
      b->set_encoding(h.encoding());
      b->set_sparse_count(h.sparse_count());
      b->set_received_through(h.received_through());
      b->set_push_seq(h.push_seq());
      b->set_wants_awaited(h.wants_awaited());
      b->set_holds_credit(h.holds_credit());
      break;
    }
    case pb::CMD_PUSH_ROWS:
    case pb::CMD_PULL_ROWS: {
      pb::Rows* b = d.mutable_rows();
      b->set_push(h.command() == pb::CMD_PUSH_ROWS);
      b->set_key(h.key());
      b->set_round(h.round());
      b->set_count(h.num_elements());
      b->set_row_dim(h.row_dim());
      b->set_push_seq(h.push_seq());
      break;
    }
    case pb::CMD_CHECKPOINT:
      d.mutable_checkpoint()->set_key(h.key());
      d.mutable_checkpoint()->set_step(h.round());
      break;
    case pb::CMD_STATS: d.mutable_stats(); break;
    case pb::CMD_REPLY:
      if (isHelloReply(h)) {
        pb::HelloReply* b = d.mutable_hello_reply();
        b->set_auth_mac(h.auth_mac());
        b->set_ipc_name(h.ipc_name());
        b->set_upgrade_token(h.upgrade_token());
        b->set_lane_token(h.lane_token());
        b->set_accepts_fused(h.accepts_fused());
      } else if (isStatsReply(h)) {
        pb::StatsReply* b = d.mutable_stats_reply();
        b->set_cpu_ns(h.stats_cpu_ns());
        b->set_peak_rss_bytes(h.stats_peak_rss_bytes());
        b->set_pushed_bytes(h.stats_pushed_bytes());
        b->set_summed_bytes(h.stats_summed_bytes());
        b->set_sum_ns(h.stats_sum_ns());
      } else {
        pb::Reply* b = d.mutable_reply();
        b->set_key(h.key());
        b->set_round(h.round());
        b->set_dtype(h.dtype());
        b->set_num_elements(h.num_elements());
        *b->mutable_awaited() = h.awaited();
      }
      break;
    case pb::CMD_ERROR: {
      pb::Error* b = d.mutable_error();
      b->set_key(h.key());
      b->set_round(h.round());
      b->set_text(h.error());
      b->set_recovering(h.recovering());
      b->set_user_error(h.user_error());
      break;
    }
    case pb::CMD_FUSED:
      d.mutable_fused();  // a body even without entries, which the peer then refuses by their count
      for (const pb::DataHeader& e : h.entries()) {
        pb::Data* entry = d.mutable_fused()->add_entries();
        *entry = fromHeader(e);
        entry->clear_protocol_version();
      }
      break;
    default: break;  // no body: a peer refuses it
  }
  return d;
}

}  // namespace zps::wire::detail

namespace zps::wire {

pb::TensorOp tensorOp(pb::DataCommand command) {
  switch (command) {
    case pb::CMD_PUSH: return pb::OP_PUSH;
    case pb::CMD_PULL: return pb::OP_PULL;
    case pb::CMD_PUSH_PULL: return pb::OP_PUSH_PULL;
    default: return pb::OP_UNSPECIFIED;
  }
}

}  // namespace zps::wire
