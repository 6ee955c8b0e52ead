// Fuzz target: the checkpoint reader (ps/common/checkpoint.h) and the param-table shard parser
// behind it (ParamStore's restore, reached through a DECLARE with restore_step, and the re-sharding
// of server/table_checkpoint.h). A checkpoint folder is shared storage that outlives the
// processes that wrote it: a truncated or foreign file must be refused with a reason, never crash
// the server that restarts on it.
//
// Input layout:
//   byte 0   bit 0 = 0: the rest is a whole checkpoint file, read with no expectations and as a
//                       shard of server 0 of 1 at step 1. Random bytes rarely get past the CRCs, so
//                       this mode mostly tests the header checks.
//            bit 0 = 1: the rest is a param-table payload; the harness wraps it in a valid header
//                       (right shape, length and CRCs) so that every input reaches the payload
//                       parser, and declares the table the payload names (bit 1 = 1: a fixed other
//                       table, to reach the mismatch checks), then pulls and pushes the restored rows
//            bit 2:     (bit 0 = 1) the payload is written as both shards of a 2-server job and
//                       restored by a 1-server job (re-sharding; a row belongs to only one of the
//                       two shards, so the other refuses it)
//            bits 3-7: the checkpoint's step - 1
//   rest     as above
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "ps/common/checkpoint.h"
#include "server/param_store.h"
#include "server/table_checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

namespace zps::fuzz {
namespace {

constexpr uint64_t kTableKey = 7;
constexpr uint64_t kMaxPayload = 1 << 20;

void readRawFile(const uint8_t* data, size_t size) {
  static const std::string path = ScratchDir::path() + "/raw.ckpt";
  writeFile(path, data, size);
  auto f = readAnyCheckpointFile(path, kMaxPayload);
  if (!f.ok()) {
    ZPS_FUZZ_CHECK(f.status().code() == StatusCode::kInvalidArgument);
  } else {
    // The payload is the file's tail, its length what the header said, its CRC right.
    ZPS_FUZZ_CHECK(f->payload.size() <= size && f->payload.size() <= kMaxPayload);
    ZPS_FUZZ_CHECK(std::memcmp(f->payload.data(), data + size - f->payload.size(), f->payload.size()) == 0);
    ZPS_FUZZ_CHECK(f->shape.table.size() <= kMaxCheckpointTableName);
    ZPS_FUZZ_CHECK(f->shape.server_rank == kNoServer || f->shape.server_rank < f->shape.num_servers);
  }
  CheckpointShape expected;
  expected.kind = CheckpointKind::kParamTable;
  expected.step = 1;
  expected.server_rank = 0;
  expected.num_servers = 1;
  expected.table = "table";
  auto checked = readCheckpointFile(path, expected, kMaxPayload);
  ZPS_FUZZ_CHECK(checked.ok() || checked.status().code() == StatusCode::kInvalidArgument);
  if (checked.ok()) ZPS_FUZZ_CHECK(f.ok() && checked->shape.step == 1 && checked->shape.table == "table");
}

// The shape fields at the start of a param-table payload, read leniently (defaults where the
// payload is too short), so that the DECLARE matches the file and restore gets to the rows.
struct Shape {
  std::string name = "table";
  uint32_t dim = 1;
  uint32_t kind = 0;
  bool has_row = false;
  uint64_t first_row_key = 0;
};

Shape peekShape(const std::string& payload) {
  Shape s;
  PayloadReader r(payload);
  uint32_t name_len = 0, dim = 0, kind = 0, state_floats = 0;
  uint64_t rows = 0;
  if (!r.get(&name_len) || name_len > r.remaining()) return s;
  std::string name(name_len, '\0');
  r.getBytes(name.data(), name_len);
  if (!r.get(&dim) || !r.get(&kind) || !r.get(&state_floats) || !r.get(&rows)) return s;
  s.name = name;
  if (dim >= 1 && dim <= 65536) s.dim = dim;
  if (kind <= static_cast<uint32_t>(kernels::OptimizerKind::kAdagrad)) s.kind = kind;
  s.has_row = r.get(&s.first_row_key);
  return s;
}

// A DECLARE (MODE_PARAM) of the table, or a PUSH_ROWS or PULL_ROWS of `count` rows in `round`.
wire::DataMessage tableMessage(pb::DataCommand command, uint64_t round, uint32_t dim, uint64_t count = 0) {
  wire::DataMessage m;
  m.dtype = DType::kFloat32;
  if (command == pb::CMD_DECLARE) {
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kTableKey);
    d->set_mode(pb::MODE_PARAM);
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    d->set_row_dim(dim);
    return m;
  }
  pb::Rows* r = m.data.mutable_rows();
  r->set_push(command == pb::CMD_PUSH_ROWS);
  r->set_key(kTableKey);
  r->set_round(round);
  r->set_row_dim(dim);
  r->set_count(count);
  return m;
}

Blob copyBlob(const void* data, size_t size) { return Blob::copyOf(data, size); }

// Returns whether the table was restored.
bool restoreTable(uint8_t mode, const uint8_t* data, size_t size) {
  const uint64_t step = 1 + (mode >> 3);
  const bool reshard = (mode & 4) != 0;
  const std::string payload(reinterpret_cast<const char*>(data), size);
  Shape shape = (mode & 2) ? Shape() : peekShape(payload);

  // The files the restore looks for (tableShardPath), written by writeCheckpointFile (its fsyncs
  // cost little on the scratch folder in /dev/shm).
  static const std::string dir = ScratchDir::path() + "/table";
  static const bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  // Under the declared table's name, so that a payload naming another table reaches the mismatch check.
  const std::string table = shape.name;
  CheckpointShape file;
  file.kind = CheckpointKind::kParamTable;
  file.step = step;
  file.num_servers = reshard ? 2 : 1;
  file.table = table;
  struct Cleanup {  // one input's files must not change what the next input does
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const auto& p : paths) std::remove(p.c_str());
    }
  } cleanup;
  for (uint32_t rank = 0; rank < file.num_servers; ++rank) {
    file.server_rank = rank;
    cleanup.paths.push_back(tableShardPath(dir, table, rank, step));
    if (!writeCheckpointFile(cleanup.paths.back(), file, payload).ok()) return false;
  }

  ParamStore store(/*num_workers=*/1, ShardPlace{dir, /*server_rank=*/0, /*num_servers=*/1, /*job_id=*/0});
  std::vector<Outgoing> out;
  wire::DataMessage declare = tableMessage(pb::CMD_DECLARE, 0, shape.dim);
  declare.data.mutable_declare()->set_name(shape.name);
  declare.data.mutable_declare()->set_restore_step(step);
  auto* opt = declare.data.mutable_declare()->mutable_optimizer();
  opt->set_kind(shape.kind);
  opt->set_lr(0.1f);
  opt->set_momentum(0.9f);
  opt->set_beta1(0.9f);
  opt->set_beta2(0.999f);
  opt->set_eps(1e-8f);
  opt->set_initial_accumulator(0.1f);
  opt->set_init_scale(0.01f);
  store.handle(/*peer=*/1, /*worker=*/0, /*local_rank=*/0, declare, &out);
  ZPS_FUZZ_CHECK(out.size() == 1);
  if (!out[0].data.has_reply()) {
    ZPS_FUZZ_CHECK(out[0].data.has_error());
    return false;
  }

  // The restored table must serve its rows: a pull of a restored key, a new key and key 0, then a
  // push of the next round, which runs the optimizer over the restored state.
  std::vector<uint64_t> keys = {0, 1};
  if (shape.has_row) keys.push_back(shape.first_row_key);
  const size_t n = keys.size();
  wire::DataMessage pull = tableMessage(pb::CMD_PULL_ROWS, step + 1, shape.dim, n);
  pull.keys = copyBlob(keys.data(), n * sizeof(uint64_t));
  out.clear();
  store.handle(1, 0, 0, pull, &out);
  ZPS_FUZZ_CHECK(out.size() == 1 && out[0].data.has_reply());
  ZPS_FUZZ_CHECK(out[0].payload.size() == n * shape.dim * sizeof(float));

  std::vector<float> grads(n * shape.dim, 0.5f);
  wire::DataMessage push = tableMessage(pb::CMD_PUSH_ROWS, step + 1, shape.dim, n);
  push.keys = pull.keys;
  push.payload = copyBlob(grads.data(), grads.size() * sizeof(float));
  out.clear();
  store.handle(1, 0, 0, push, &out);
  ZPS_FUZZ_CHECK(!out.empty() && out[0].data.has_reply());
  ZPS_FUZZ_CHECK(store.counters().table_rows >= 1);
  return true;
}

// Once per process: a valid empty shard must restore. Should the harness's idea of the file name
// (tableShardPath) go stale, every input would stop at "does not exist" and the fuzzer
// would test nothing; this fails loudly instead.
void selfTest() {
  static const bool ok = [] {
    PayloadWriter w;
    w.put(uint32_t{1});
    w.putBytes("t", 1);
    w.put(uint32_t{1});  // dim
    w.put(uint32_t{0});  // sgd
    w.put(uint32_t{0});  // state floats
    w.put(uint64_t{0});  // rows
    const std::string payload = w.take();
    return restoreTable(/*mode=*/1, reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  }();
  if (!ok) std::fprintf(stderr, "checkpoint_fuzzer: a valid shard did not restore; stale path?\n");
  ZPS_FUZZ_CHECK(ok);
}

}  // namespace
}  // namespace zps::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zps::fuzz::quietLogging();
  zps::fuzz::selfTest();
  if (size < 1) return 0;
  if ((data[0] & 1) == 0) {
    zps::fuzz::readRawFile(data + 1, size - 1);
  } else {
    (void)zps::fuzz::restoreTable(data[0], data + 1, size - 1);
  }
  return 0;
}
