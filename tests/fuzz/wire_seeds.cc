// The wire fuzzer's seeds (tests/fuzz/wire_fuzzer.cc): every data and control message the codec
// accepts, made with the production encoders, in the target's frame layout.
#include "kernels/optimizer.h"
#include "ps/wire/codec.h"
#include "tests/fuzz/seed_files.h"

namespace zps::fuzz {

void wireSeeds() {
  auto control = [](const std::string& name, const pb::Control& c) {
    put("wire", name, packFrames(wire::encodeControl(c)));
  };
  pb::Control c;
  auto* r = c.mutable_register_();
  r->set_magic(wire::kMagic);
  r->set_protocol_version(wire::kProtocolVersion);
  r->set_role(pb::WORKER);
  r->set_host("10.0.0.5");
  r->set_requested_rank(1);
  r->set_rank_source("DMLC_WORKER_ID");
  r->set_hostname("job-worker-1");
  r->set_pid(4242);
  r->set_expected_servers(2);
  r->set_expected_workers(2);
  control("register-worker", c);
  r->set_role(pb::SERVER);
  r->set_port(9001);
  r->set_requested_rank(-1);
  r->set_rank_source("arrival order");
  control("register-server", c);

  c.Clear();
  auto* rr = c.mutable_register_reply();
  rr->set_accepted(true);
  rr->set_rank(0);
  rr->set_heartbeat_interval_ms(5000);
  rr->set_heartbeat_timeout_ms(30000);
  for (int i = 0; i < 3; ++i) {
    auto* n = rr->add_nodes();
    n->set_role(i == 0 ? pb::SCHEDULER : i == 1 ? pb::SERVER : pb::WORKER);
    n->set_rank(i == 0 ? 0 : i - 1);
    n->set_host("10.0.0." + std::to_string(i + 1));
    n->set_port(9000 + i);
    n->set_hostname("node-" + std::to_string(i));
    n->set_pid(100 + i);
  }
  control("register-reply", c);
  c.Clear();
  c.mutable_register_reply()->set_error("worker rank 0 is already taken");
  control("register-refused", c);

  c.Clear();
  c.mutable_barrier()->set_group(pb::GROUP_WORKERS);
  c.mutable_barrier()->set_sequence(3);
  control("barrier", c);
  c.Clear();
  c.mutable_barrier_release()->set_group(pb::GROUP_ALL);
  c.mutable_barrier_release()->set_sequence(3);
  control("barrier-release", c);
  c.Clear();
  c.mutable_heartbeat()->set_sent_unix_ms(1700000000000);
  control("heartbeat", c);
  c.Clear();
  c.mutable_finished()->set_ok(false);
  c.mutable_finished()->set_message("worker 1 failed");
  control("finished", c);
  c.Clear();
  c.mutable_shutdown()->set_exit_code(1);
  c.mutable_shutdown()->set_reason("server 0 is dead");
  control("shutdown", c);

  auto header = [](pb::DataCommand cmd, DType dtype, uint64_t n) {
    pb::DataHeader h;
    h.set_command(cmd);
    h.set_request_id(17);
    h.set_key(3);
    h.set_round(2);
    h.set_dtype(static_cast<uint32_t>(dtype));
    h.set_num_elements(n);
    return h;
  };
  pb::DataHeader h = header(pb::CMD_HELLO, DType::kFloat32, 0);
  h.set_magic(wire::kMagic);
  h.set_protocol_version(wire::kProtocolVersion);
  h.set_worker_rank(1);
  put("wire", "hello", packFrames(wire::encodeData(h)));
  h = header(pb::CMD_DECLARE, DType::kFloat16, 8);
  h.set_name("fc1.grad");
  put("wire", "declare-sum", packFrames(wire::encodeData(h)));
  h = header(pb::CMD_DECLARE, DType::kFloat32, 0);
  h.set_mode(pb::MODE_PARAM);
  h.set_name("embedding");
  h.set_row_dim(4);
  h.set_restore_step(5);
  h.mutable_optimizer()->set_kind(2);
  h.mutable_optimizer()->set_lr(0.01f);
  h.mutable_optimizer()->set_init_scale(0.05f);
  h.mutable_optimizer()->set_init_seed(9);
  put("wire", "declare-param", packFrames(wire::encodeData(h), /*tight=*/false));
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8};
  for (DType d : dtypes) {
    const size_t n = 3;
    put("wire", "push-" + std::string(dtypeName(d)),
        packFrames(wire::encodeData(header(pb::CMD_PUSH, d, n), bytesOf(n * dtypeSize(d)))));
  }
  put("wire", "push-pull", packFrames(wire::encodeData(header(pb::CMD_PUSH_PULL, DType::kInt32, 2), bytesOf(8))));
  put("wire", "push-tight", packFrames(wire::encodeData(header(pb::CMD_PUSH, DType::kUInt8, 4), bytesOf(4)), true));
  put("wire", "pull", packFrames(wire::encodeData(header(pb::CMD_PULL, DType::kFloat32, 4))));
  put("wire", "reply-sum", packFrames(wire::encodeData(header(pb::CMD_REPLY, DType::kFloat64, 2), bytesOf(16))));
  put("wire", "reply-ack", packFrames(wire::encodeData(header(pb::CMD_REPLY, DType::kFloat32, 0))));
  h = header(pb::CMD_ERROR, DType::kFloat32, 0);
  h.set_error("table key 3 was never declared");
  put("wire", "error", packFrames(wire::encodeData(h)));
  h = header(pb::CMD_PUSH_ROWS, DType::kFloat32, 2);
  h.set_row_dim(3);
  put("wire", "push-rows", packFrames(wire::encodeRows(h, bytesOf(16), bytesOf(24, 100))));
  h = header(pb::CMD_PULL_ROWS, DType::kFloat32, 3);
  h.set_row_dim(2);
  put("wire", "pull-rows", packFrames(wire::encodeRows(h, bytesOf(24))));
  put("wire", "pull-rows-tight", packFrames(wire::encodeRows(h, bytesOf(24)), true));
  put("wire", "checkpoint", packFrames(wire::encodeData(header(pb::CMD_CHECKPOINT, DType::kFloat32, 0))));
  put("wire", "stats", packFrames(wire::encodeData(header(pb::CMD_STATS, DType::kFloat32, 0))));
  h.Clear();
  h.set_command(pb::CMD_REPLY);
  h.set_request_id(17);
  h.set_stats_cpu_ns(123456789);
  h.set_stats_pushed_bytes(4096);
  put("wire", "stats-reply", packFrames(wire::encodeData(h)));
  h.Clear();
  h.set_command(pb::CMD_REPLY);
  h.set_request_id(1);
  h.set_ipc_name("zps-0123abcd");
  h.set_upgrade_token(77);
  h.set_lane_token(78);
  h.set_accepts_fused(true);
  put("wire", "hello-reply", packFrames(wire::encodeData(h)));
  h = header(pb::CMD_ERROR, DType::kFloat32, 0);
  h.set_error("recovering: this server is at generation 2");
  h.set_recovering(true);
  h.set_generation(2);
  put("wire", "error-recovering", packFrames(wire::encodeData(h)));
  {
    // A HELLO of protocol version 1 (the flat header in the envelope's field 2), which is refused.
    pb::Envelope old;
    old.mutable_version1_data()->set_command(pb::CMD_HELLO);
    old.mutable_version1_data()->set_request_id(1);
    old.mutable_version1_data()->set_magic(wire::kMagic);
    old.mutable_version1_data()->set_protocol_version(1);
    put("wire", "version1-hello", packFrames({Blob::fromString(old.SerializeAsString())}));
  }
  put("wire", "no-frames", std::string(1, '\0'));
  // Compressed pushes (kernels/compressor.h): fp16, and sparse entries at indices 0 and 2 of 3.
  h = header(pb::CMD_PUSH, DType::kFloat32, 3);
  h.set_encoding(pb::ENCODING_FP16);
  put("wire", "push-fp16", packFrames(wire::encodeData(h, bytesOf(6))));
  h.set_command(pb::CMD_PUSH_PULL);
  h.set_encoding(pb::ENCODING_SPARSE);
  h.set_sparse_count(2);
  put("wire", "push-pull-sparse", packFrames(wire::encodeData(h, sparseBytes({0, 2}))));
  // Fused (CMD_FUSED): a push of 2 int32, a pull and an fp16 push-pull of 3 floats (8 + 6 bytes); and
  // the replies: an acknowledgement, a sum of 2 float64 and an error.
  pb::DataHeader fused;
  fused.set_command(pb::CMD_FUSED);
  *fused.add_entries() = header(pb::CMD_PUSH, DType::kInt32, 2);
  *fused.add_entries() = header(pb::CMD_PULL, DType::kFloat32, 4);
  fused.mutable_entries(1)->set_key(6);
  h = header(pb::CMD_PUSH_PULL, DType::kFloat32, 3);
  h.set_key(7);
  h.set_encoding(pb::ENCODING_FP16);
  *fused.add_entries() = h;
  put("wire", "fused-requests", packFrames(wire::encodeData(fused, bytesOf(14))));
  fused.clear_entries();
  *fused.add_entries() = header(pb::CMD_REPLY, DType::kFloat32, 0);
  *fused.add_entries() = header(pb::CMD_REPLY, DType::kFloat64, 2);
  h = header(pb::CMD_ERROR, DType::kFloat32, 0);
  h.set_error("key 9 was never declared");
  *fused.add_entries() = h;
  put("wire", "fused-replies", packFrames(wire::encodeData(fused, bytesOf(16))));
}

}  // namespace zps::fuzz
