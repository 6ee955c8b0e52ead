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

  // Every data seed is request 17; a body with a key names key 3, round 2.
  auto data = [] {
    pb::Data d;
    d.set_request_id(17);
    return d;
  };
  auto tensor = [&](pb::TensorOp op, DType dtype, uint64_t n) {
    pb::Data d = data();
    pb::Tensor* t = d.mutable_tensor();
    t->set_op(op);
    t->set_key(3);
    t->set_round(2);
    t->set_dtype(static_cast<uint32_t>(dtype));
    t->set_num_elements(n);
    return d;
  };
  auto declare = [&](DType dtype, uint64_t n, const std::string& name) {
    pb::Data d = data();
    pb::Declare* b = d.mutable_declare();
    b->set_key(3);
    b->set_dtype(static_cast<uint32_t>(dtype));
    b->set_num_elements(n);
    b->set_name(name);
    return d;
  };
  auto reply = [&](DType dtype, uint64_t n) {
    pb::Data d = data();
    pb::Reply* b = d.mutable_reply();
    b->set_key(3);
    b->set_round(2);
    b->set_dtype(static_cast<uint32_t>(dtype));
    b->set_num_elements(n);
    return d;
  };
  auto error = [&](const std::string& text) {
    pb::Data d = data();
    d.mutable_error()->set_key(3);
    d.mutable_error()->set_round(2);
    d.mutable_error()->set_text(text);
    return d;
  };
  auto rows = [&](bool push, uint64_t count, uint32_t row_dim) {
    pb::Data d = data();
    pb::Rows* b = d.mutable_rows();
    b->set_push(push);
    b->set_key(3);
    b->set_round(2);
    b->set_count(count);
    b->set_row_dim(row_dim);
    return d;
  };
  pb::Data d = data();
  d.mutable_hello()->set_magic(wire::kMagic);
  d.mutable_hello()->set_worker_rank(1);
  put("wire", "hello", packFrames(wire::encodeData(d)));
  put("wire", "declare-sum", packFrames(wire::encodeData(declare(DType::kFloat16, 8, "fc1.grad"))));
  d = declare(DType::kFloat32, 0, "embedding");
  pb::Declare* table = d.mutable_declare();
  table->set_mode(pb::MODE_PARAM);
  table->set_row_dim(4);
  table->set_restore_step(5);
  table->mutable_optimizer()->set_kind(2);
  table->mutable_optimizer()->set_lr(0.01f);
  table->mutable_optimizer()->set_init_scale(0.05f);
  table->mutable_optimizer()->set_init_seed(9);
  put("wire", "declare-param", packFrames(wire::encodeData(d), /*tight=*/false));
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8};
  for (DType dt : dtypes) {
    const size_t n = 3;
    put("wire", "push-" + std::string(dtypeName(dt)),
        packFrames(wire::encodeData(tensor(pb::OP_PUSH, dt, n), bytesOf(n * dtypeSize(dt)))));
  }
  put("wire", "push-pull", packFrames(wire::encodeData(tensor(pb::OP_PUSH_PULL, DType::kInt32, 2), bytesOf(8))));
  put("wire", "push-tight", packFrames(wire::encodeData(tensor(pb::OP_PUSH, DType::kUInt8, 4), bytesOf(4)), true));
  put("wire", "pull", packFrames(wire::encodeData(tensor(pb::OP_PULL, DType::kFloat32, 4))));
  put("wire", "reply-sum", packFrames(wire::encodeData(reply(DType::kFloat64, 2), bytesOf(16))));
  put("wire", "reply-ack", packFrames(wire::encodeData(reply(DType::kFloat32, 0))));
  put("wire", "error", packFrames(wire::encodeData(error("table key 3 was never declared"))));
  put("wire", "push-rows", packFrames(wire::encodeRows(rows(true, 2, 3), bytesOf(16), bytesOf(24, 100))));
  put("wire", "pull-rows", packFrames(wire::encodeRows(rows(false, 3, 2), bytesOf(24))));
  put("wire", "pull-rows-tight", packFrames(wire::encodeRows(rows(false, 3, 2), bytesOf(24)), true));
  d = data();
  d.mutable_checkpoint()->set_key(3);
  d.mutable_checkpoint()->set_step(2);
  put("wire", "checkpoint", packFrames(wire::encodeData(d)));
  d = data();
  d.mutable_stats();
  put("wire", "stats", packFrames(wire::encodeData(d)));
  d = data();
  d.mutable_stats_reply()->set_cpu_ns(123456789);
  d.mutable_stats_reply()->set_pushed_bytes(4096);
  put("wire", "stats-reply", packFrames(wire::encodeData(d)));
  d.Clear();
  d.set_request_id(1);
  pb::HelloReply* hello_reply = d.mutable_hello_reply();
  hello_reply->set_ipc_name("zps-0123abcd");
  hello_reply->set_upgrade_token(77);
  hello_reply->set_lane_token(78);
  hello_reply->set_accepts_fused(true);
  put("wire", "hello-reply", packFrames(wire::encodeData(d)));
  d = error("recovering: this server is at generation 2");
  d.mutable_error()->set_recovering(true);
  d.set_generation(2);
  put("wire", "error-recovering", packFrames(wire::encodeData(d)));
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
  d = tensor(pb::OP_PUSH, DType::kFloat32, 3);
  d.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
  put("wire", "push-fp16", packFrames(wire::encodeData(d, bytesOf(6))));
  d.mutable_tensor()->set_op(pb::OP_PUSH_PULL);
  d.mutable_tensor()->set_encoding(pb::ENCODING_SPARSE);
  d.mutable_tensor()->set_sparse_count(2);
  put("wire", "push-pull-sparse", packFrames(wire::encodeData(d, sparseBytes({0, 2}))));
  // Without zeros (kernels/nonzero_encoding.h): elements 0 and 2 of 3 travel, in a push and in a sum.
  d.mutable_tensor()->set_encoding(pb::ENCODING_NONZERO);
  d.mutable_tensor()->set_sparse_count(2);
  put("wire", "push-pull-nonzero",
      packFrames(wire::encodeData(d, Blob::fromString(std::string("\x05", 1) + std::string(8, '\x01')))));
  pb::Data sum;
  sum.set_request_id(3);
  sum.mutable_reply()->set_key(1);
  sum.mutable_reply()->set_round(1);
  sum.mutable_reply()->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  sum.mutable_reply()->set_num_elements(3);
  sum.mutable_reply()->set_encoding(pb::ENCODING_NONZERO);
  sum.mutable_reply()->set_sparse_count(2);
  put("wire", "reply-nonzero",
      packFrames(wire::encodeData(sum, Blob::fromString(std::string("\x05", 1) + std::string(8, '\x01')))));
  // Fused: a push of 2 int32, a pull and an fp16 push-pull of 3 floats (8 + 6 bytes); and the
  // replies: an acknowledgement, a sum of 2 float64 and an error. Entries leave the protocol version
  // to the fused message.
  pb::Data fused;
  fused.set_protocol_version(wire::kProtocolVersion);
  pb::Fused* entries = fused.mutable_fused();
  *entries->add_entries() = tensor(pb::OP_PUSH, DType::kInt32, 2);
  *entries->add_entries() = tensor(pb::OP_PULL, DType::kFloat32, 4);
  entries->mutable_entries(1)->mutable_tensor()->set_key(6);
  d = tensor(pb::OP_PUSH_PULL, DType::kFloat32, 3);
  d.mutable_tensor()->set_key(7);
  d.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
  *entries->add_entries() = d;
  put("wire", "fused-requests", packFrames(wire::encodeData(fused, bytesOf(14))));
  entries->clear_entries();
  *entries->add_entries() = reply(DType::kFloat32, 0);
  *entries->add_entries() = reply(DType::kFloat64, 2);
  *entries->add_entries() = error("key 9 was never declared");
  put("wire", "fused-replies", packFrames(wire::encodeData(fused, bytesOf(16))));
}

}  // namespace zps::fuzz
