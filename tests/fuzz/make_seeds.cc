// Writes the seed corpora of the fuzz targets: valid inputs of every kind, made with the production
// encoders and writers where there are some, so that the fuzzers start from deep inside each parser
// instead of spending their first minutes discovering the formats. The output is committed under
// tests/fuzz/corpus/<target>/; rerun this when a format changes:
//
//   cmake --build build --target zps_fuzz_make_seeds
//   build/bin/zps_fuzz_make_seeds tests/fuzz/corpus
//
// Seeds are named seed-<what>, so they never collide with the hash-named inputs libFuzzer adds.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "ps/common/checkpoint.h"
#include "ps/wire/codec.h"
#include "server/param_store.h"
#include "server/table_checkpoint.h"
#include "tests/fuzz/seed_files.h"

namespace zps::fuzz {
namespace {

// ---- config: "NAME=VALUE" lines and "--flag=value" lines ----

void configSeeds() {
  put("config", "worker",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=10.0.0.1\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=2\n"
      "DMLC_NUM_WORKER=2\nDMLC_WORKER_ID=1\nDMLC_NODE_HOST=10.0.0.7\nPS_VERBOSE=1\n");
  put("config", "scheduler",
      "DMLC_ROLE=scheduler\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=1\nDMLC_NUM_WORKER=1\n"
      "DMLC_NODE_HOST=127.0.0.1\nZPS_RENDEZVOUS_TIMEOUT=60\nZPS_RENDEZVOUS_LOG_INTERVAL=2.5\n");
  put("config", "server",
      "DMLC_ROLE=server\nDMLC_PS_ROOT_URI=scheduler.job.svc\nDMLC_PS_ROOT_PORT=9000\n"
      "DMLC_NUM_SERVER=4\nDMLC_NUM_WORKER=8\nZPS_SERVER_ID=3\nPORT=9100\n"
      "ZPS_SERVER_ENGINE_THREADS=4\nZPS_CHECKPOINT_DIR= /ckpt \nZPS_CHECKPOINT_EVERY=100\n"
      "DMLC_NODE_HOST=10.1.2.3\n");
  put("config", "kubernetes",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=job-scheduler\nDMLC_PS_ROOT_PORT=9000\n"
      "DMLC_NUM_SERVER=1\nDMLC_NUM_WORKER=4\nHOSTNAME=job-worker-3\nDMLC_USE_KUBERNETES=1\n"
      "JOB_COMPLETION_INDEX=2\nDMLC_NODE_HOST=10.0.0.9\n");
  put("config", "volcano-hostname",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=job-scheduler-0\nDMLC_PS_ROOT_PORT=9000\n"
      "DMLC_NUM_SERVER=1\nDMLC_NUM_WORKER=4\nHOSTNAME=job-worker-12\nDMLC_NODE_HOST=10.0.0.9\n");
  put("config", "timeouts",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=127.0.0.1\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=1\n"
      "DMLC_NUM_WORKER=1\nDMLC_NODE_HOST=127.0.0.1\nPS_HEARTBEAT_INTERVAL=0.5\n"
      "ZPS_HEARTBEAT_TIMEOUT=3\nZPS_CONNECT_TIMEOUT=0.001\nZPS_REQUEST_TIMEOUT=2592000\n"
      "ZPS_SHUTDOWN_LINGER=0\nZPS_PARTITION_BYTES=64\nZPS_MAX_MESSAGE_BYTES=4096\n"
      "ZPS_ENABLE_ASYNC=1\nZPS_RESEND_TIMEOUT=1.5\nZPS_TEST_FAULTS=drop=0.05\n");
  put("config", "ps-resend",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=127.0.0.1\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=1\n"
      "DMLC_NUM_WORKER=1\nDMLC_NODE_HOST=127.0.0.1\nPS_RESEND=1\nPS_RESEND_TIMEOUT=250\n"
      "BYTEPS_ENABLE_ASYNC=0\nDMLC_PORT=0\n");
  put("config", "flags",
      "DMLC_ROLE=server\nDMLC_PS_ROOT_URI=127.0.0.1\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=1\n"
      "DMLC_NUM_WORKER=1\nDMLC_NODE_HOST=127.0.0.1\n--heartbeat_interval=1\n"
      "--heartbeat_timeout=2\n--partition_bytes=65536\n--server_id=0\n--checkpoint_dir=/ckpt\n"
      "--enable_async=true\n--resend_timeout=0.25\n--max_message_bytes=1048576\n");
  put("config", "bad-values",
      "DMLC_ROLE=worker \nDMLC_PS_ROOT_URI=\nDMLC_PS_ROOT_PORT=90000\nDMLC_NUM_SERVER=two\n"
      "DMLC_NUM_WORKER=-1\nPS_HEARTBEAT_TIMEOUT=1e400\nZPS_PARTITION_BYTES=0x10\n");
  put("config", "interface",
      "DMLC_ROLE=worker\nDMLC_PS_ROOT_URI=127.0.0.1\nDMLC_PS_ROOT_PORT=9000\nDMLC_NUM_SERVER=1\n"
      "DMLC_NUM_WORKER=1\nDMLC_INTERFACE=lo\n");
}

// ---- dataset: [format, task | fraction << 2, label column] + file ----

std::string dataSeed(int format, int task, int fraction, int8_t label_column, const std::string& text) {
  std::string s;
  s.push_back(static_cast<char>(format));
  s.push_back(static_cast<char>(task | (fraction << 2)));
  s.push_back(static_cast<char>(label_column));
  return s + text;
}

void datasetSeeds() {
  put("dataset", "csv-header",
      dataSeed(0, 0, 0, -1,
               "x1,x2,x3,label\n0.5,1,2,0\n1.5,-2,3e2,1\n# comment\n\n2,3,4,2\n"
               "-1,0.25,8,1\n"));
  put("dataset", "csv-whitespace-regression", dataSeed(0, 1, 1, 0, "3.5 1 2\r\n  -7.25\t4 5\n1e-3 6 7\n+2 8 9\n"));
  put("dataset", "csv-classification", dataSeed(0, 2, 2, 1, "1,0,5\n2,1,6\n3,4,7\n4,0,8\n5,3,9\n"));
  put("dataset", "libsvm-one-based",
      dataSeed(1, 0, 0, -1, "1 1:0.5 3:1.5\n0 2:2 qid:3 4:-1\n1 1:1 # note\n0 4:2.5e1\n"));
  put("dataset", "libsvm-zero-based-pm1",
      dataSeed(1, 0, 3, -1, "+1 0:1 2:3\n-1 1:2\n-1 0:0.5 1:0.25 2:0.125\n+1 2:9\n"));
  put("dataset", "libsvm-regression", dataSeed(1, 1, 0, -1, "3.25 1:1 2:2\n-0.5 2:1\n7 1:3\n"));
  std::string criteo;
  for (int row = 0; row < 4; ++row) {
    criteo += row % 2 ? "1" : "0";
    for (int j = 0; j < 13; ++j) criteo += "\t" + (j == row ? "" : std::to_string(j * row - 3));
    for (int f = 0; f < 26; ++f) {
      criteo += "\t";
      if (f != row) criteo += "a" + std::to_string((f * 7 + row) % 5) + "9f3c";
    }
    criteo += row == 2 ? "\r\n" : "\n";
  }
  put("dataset", "criteo", dataSeed(2, 0, 0, -1, criteo));
}

// ---- checkpoint: [mode] + file (mode 0) or payload (mode 1) ----

void checkpointSeeds() {
  char tmpl[] = "/tmp/zps-seeds-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  const std::string dir = tmpl;
  const uint64_t kKey = 7, kStep = 5;
  const char* names[] = {"sgd", "momentum", "adam", "adagrad"};
  for (uint32_t kind = 0; kind <= 3; ++kind) {
    // A real shard, written by the server's own code: declare, push rows, checkpoint.
    ParamStore store(1, ShardPlace{dir, 0, 1, 0});
    std::vector<Outgoing> out;
    wire::DataMessage m;
    m.dtype = DType::kFloat32;
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kKey);
    d->set_mode(pb::MODE_PARAM);
    d->set_row_dim(2);
    d->set_name("emb");
    d->set_async(true);
    d->mutable_optimizer()->set_kind(kind);
    d->mutable_optimizer()->set_lr(0.1f);
    d->mutable_optimizer()->set_init_scale(0.1f);
    store.handle(1, 0, 0, m, &out);
    const uint64_t keys[] = {11, 3, 11000000000ull};
    const float grads[] = {1, 2, 3, 4, 5, 6};
    pb::Rows* rows = m.data.mutable_rows();
    rows->set_push(true);
    rows->set_key(kKey);
    rows->set_row_dim(2);
    rows->set_count(3);
    rows->set_push_seq(1);  // an async table applies each numbered push once
    m.keys = Blob::copyOf(keys, sizeof(keys));
    m.payload = Blob::copyOf(grads, sizeof(grads));
    store.handle(1, 0, 0, m, &out);
    m.data.mutable_checkpoint()->set_key(kKey);
    m.data.mutable_checkpoint()->set_step(kStep);
    m.keys = Blob();
    m.payload = Blob();
    store.handle(1, 0, 0, m, &out);
    for (const auto& o : out) {
      if (!o.data.has_reply()) {
        std::fprintf(stderr, "param store refused a seed step: %s\n", o.data.error().text().c_str());
        std::exit(1);
      }
    }
    const std::string path = tableShardPath(dir, "emb", 0, kStep);
    const std::string file = readFile(path);
    auto shard = readAnyCheckpointFile(path, 1 << 20);
    if (!shard.ok()) {
      std::fprintf(stderr, "the param store wrote no checkpoint: %s\n", shard.status().message().c_str());
      std::exit(1);
    }
    put("checkpoint", std::string("file-table-") + names[kind], std::string(1, '\0') + file);
    put("checkpoint", std::string("payload-table-") + names[kind],
        std::string(1, static_cast<char>(1 | ((kStep - 1) << 3))) + shard->payload);
    put("checkpoint", std::string("payload-reshard-") + names[kind],
        std::string(1, static_cast<char>(1 | 4 | ((kStep - 1) << 3))) + shard->payload);
  }
  const std::string dense = dir + "/dense.ckpt";
  std::string model(64, '\0');
  for (size_t i = 0; i < model.size(); ++i) model[i] = static_cast<char>(i * 37);
  CheckpointShape shape;  // a dense model: no server, no table
  shape.step = 42;
  shape.job_id = 0x0123456789abcdefull;
  CheckpointShape shard;  // a header the fixed-shape read expects (server 0 of 1, step 1, 'table')
  shard.kind = CheckpointKind::kParamTable;
  shard.step = 1;
  shard.server_rank = 0;
  shard.num_servers = 1;
  shard.table = "table";
  if (!writeCheckpointFile(dense, shape, model).ok() || !writeCheckpointFile(dense + ".empty", shape, "").ok() ||
      !writeCheckpointFile(dense + ".shard", shard, model).ok()) {
    std::fprintf(stderr, "writeCheckpointFile failed\n");
    std::exit(1);
  }
  put("checkpoint", "file-dense", std::string(1, '\0') + readFile(dense));
  put("checkpoint", "file-dense-empty", std::string(1, '\0') + readFile(dense + ".empty"));
  put("checkpoint", "file-shard-header", std::string(1, '\0') + readFile(dense + ".shard"));
  std::filesystem::remove_all(dir);
}

// ---- server: records [worker][2-byte length][message in splitFrames's layout] ----

std::string record(int worker, const std::vector<Blob>& frames) {
  const std::string msg = packFrames(frames);
  std::string s;
  s.push_back(static_cast<char>(worker));
  s.push_back(static_cast<char>(msg.size() & 0xFF));
  s.push_back(static_cast<char>(msg.size() >> 8));
  return s + msg;
}

// The requests of the server seeds, each with request id round x 10 + its command number.
pb::Data requestOf(pb::DataCommand cmd, uint64_t round) {
  pb::Data d;
  d.set_request_id(round * 10 + cmd);
  return d;
}

pb::Data tensorOf(pb::DataCommand cmd, uint64_t key, uint64_t round, uint64_t n, DType dtype = DType::kFloat32) {
  pb::Data d = requestOf(cmd, round);
  pb::Tensor* t = d.mutable_tensor();
  t->set_op(wire::tensorOp(cmd));
  t->set_key(key);
  t->set_round(round);
  t->set_dtype(static_cast<uint32_t>(dtype));
  t->set_num_elements(n);
  return d;
}

pb::Data sumDeclareOf(uint64_t key, uint64_t n, DType dtype = DType::kFloat32) {
  pb::Data d = requestOf(pb::CMD_DECLARE, 0);
  pb::Declare* b = d.mutable_declare();
  b->set_key(key);
  b->set_dtype(static_cast<uint32_t>(dtype));
  b->set_num_elements(n);
  return d;
}

pb::Data rowsOf(bool push, uint64_t key, uint64_t round, uint64_t count) {
  pb::Data d = requestOf(push ? pb::CMD_PUSH_ROWS : pb::CMD_PULL_ROWS, round);
  pb::Rows* r = d.mutable_rows();
  r->set_push(push);
  r->set_key(key);
  r->set_round(round);
  r->set_count(count);
  r->set_row_dim(2);
  return d;
}

pb::Data checkpointOf(uint64_t key, uint64_t step) {
  pb::Data d = requestOf(pb::CMD_CHECKPOINT, step);
  d.mutable_checkpoint()->set_key(key);
  d.mutable_checkpoint()->set_step(step);
  return d;
}

void serverSeeds() {
  // Sum mode: both workers declare, push and pull two rounds; one pull arrives before the round
  // completes (parked), one push is a duplicate.
  std::string sum;
  for (int w = 0; w < 2; ++w) {
    pb::Data d = sumDeclareOf(5, 4);
    d.mutable_declare()->set_name("w");
    sum += record(w, wire::encodeData(d));
  }
  for (uint64_t round = 1; round <= 2; ++round) {
    sum += record(0, wire::encodeData(tensorOf(pb::CMD_PUSH, 5, round, 4), bytesOf(16)));
    sum += record(0, wire::encodeData(tensorOf(pb::CMD_PULL, 5, round, 0)));
    sum += record(0, wire::encodeData(tensorOf(pb::CMD_PUSH, 5, round, 4), bytesOf(16)));
    sum += record(1, wire::encodeData(tensorOf(pb::CMD_PUSH_PULL, 5, round, 4), bytesOf(16, 9)));
  }
  put("server", "sum-rounds", sum);

  // Compressed pushes of one round: worker 0 sparse, worker 1 fp16.
  std::string compressed;
  for (int w = 0; w < 2; ++w) {
    pb::Data d = sumDeclareOf(5, 4);
    d.mutable_declare()->set_name("w");
    compressed += record(w, wire::encodeData(d));
  }
  pb::Data c = tensorOf(pb::CMD_PUSH, 5, 1, 4);
  c.mutable_tensor()->set_encoding(pb::ENCODING_SPARSE);
  c.mutable_tensor()->set_sparse_count(2);
  compressed += record(0, wire::encodeData(c, sparseBytes({1, 3})));
  c = tensorOf(pb::CMD_PUSH_PULL, 5, 1, 4);
  c.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
  compressed += record(1, wire::encodeData(c, bytesOf(8)));
  put("server", "sum-compressed", compressed);

  // An async sum key: pushes are added at once, pulls get a snapshot.
  std::string async;
  pb::Data h = sumDeclareOf(6, 2, DType::kInt64);
  h.mutable_declare()->set_async(true);
  async += record(0, wire::encodeData(h));
  h = tensorOf(pb::CMD_PUSH, 6, 0, 2, DType::kInt64);
  async += record(0, wire::encodeData(h, bytesOf(16)));
  async += record(1, wire::encodeData(h, bytesOf(16, 50)));
  h.mutable_tensor()->set_op(pb::OP_PULL);
  async += record(1, wire::encodeData(h));
  put("server", "sum-async", async);

  // Param mode: declare a table, push and pull rows for two rounds, checkpoint, declare again.
  std::string param;
  auto declare = [&](uint64_t key, uint64_t restore_step, bool async_table) {
    pb::Data d = sumDeclareOf(key, 0);
    pb::Declare* b = d.mutable_declare();
    b->set_mode(pb::MODE_PARAM);
    b->set_name("emb");
    b->set_row_dim(2);
    b->set_async(async_table);
    b->set_restore_step(restore_step);
    b->mutable_optimizer()->set_kind(2);
    b->mutable_optimizer()->set_lr(0.1f);
    b->mutable_optimizer()->set_init_scale(0.1f);
    return wire::encodeData(d);
  };
  for (int w = 0; w < 2; ++w) param += record(w, declare(8, 0, false));
  for (uint64_t round = 1; round <= 2; ++round) {
    for (int w = 0; w < 2; ++w) {
      pb::Data p = rowsOf(/*push=*/false, 8, round, 2);
      param += record(w, wire::encodeRows(p, bytesOf(16, 3 * w)));
      p.mutable_rows()->set_push(true);
      param += record(w, wire::encodeRows(p, bytesOf(16, 3 * w), bytesOf(16, 64)));
    }
  }
  param += record(0, wire::encodeData(checkpointOf(8, 2)));
  param += record(0, declare(8, 0, false));
  put("server", "param-rounds-checkpoint", param);

  // An async table: rows are applied at once, and a checkpoint is written at once.
  std::string async_param;
  async_param += record(0, declare(9, 0, true));
  pb::Data p = rowsOf(/*push=*/true, 9, 0, 2);
  async_param += record(1, wire::encodeRows(p, bytesOf(16), bytesOf(16, 7)));
  async_param += record(0, wire::encodeData(checkpointOf(9, 4)));
  p.mutable_rows()->set_push(false);
  async_param += record(1, wire::encodeRows(p, bytesOf(16)));
  put("server", "param-async-checkpoint", async_param);
}

// ---- faults: the spec itself ----

void faultSeeds() {
  put("faults", "all", "drop=0.05,dup=0.05,delay=0.05,delay_ms=20,seed=7");
  put("faults", "drop", "drop=1");
  put("faults", "empty-items", ",,dup=0.5,");
  put("faults", "bad", "drop=0.6,delay=0.6");
}

}  // namespace
}  // namespace zps::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (e.g. tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  zps::fuzz::seedRoot() = argv[1];
  zps::fuzz::wireSeeds();
  zps::fuzz::configSeeds();
  zps::fuzz::datasetSeeds();
  zps::fuzz::checkpointSeeds();
  zps::fuzz::serverSeeds();
  zps::fuzz::faultSeeds();
  std::printf("seeds written under %s\n", argv[1]);
  return 0;
}
