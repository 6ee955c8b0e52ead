// ParamStore's answer to a DECLARE that restores a table (restore_step > 0): a shard that is
// refused (missing, damaged) is an ERROR marked as the user's to fix (user_error, so `zps train`
// exits 2); a declaration refused for another reason is not marked; a good shard restores.
#include <catch2/catch.hpp>
#include <fstream>

#include "kernels/optimizer.h"
#include "server/param_store.h"
#include "server/table_checkpoint.h"
#include "tests/unit/scratch_folder.h"

namespace zps {
namespace {

using testing::ScratchFolder;

constexpr uint64_t kJob = 0x77;

wire::DataMessage declaration(uint64_t restore_step, uint32_t dim) {
  wire::DataMessage m;
  m.data.set_request_id(1);
  pb::Declare* d = m.data.mutable_declare();
  d->set_key(5);
  d->set_mode(pb::MODE_PARAM);
  d->set_name("emb");
  d->set_row_dim(dim);
  d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  d->set_restore_step(restore_step);
  d->mutable_optimizer()->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kSgd));
  d->mutable_optimizer()->set_lr(1.0f);
  m.dtype = DType::kFloat32;
  return m;
}

TEST_CASE("param store: a DECLARE whose checkpoint is refused answers an ERROR marked user_error") {
  ScratchFolder dir;
  const ShardPlace place{dir.path, 0, 1, kJob};
  TableRows rows;
  rows.keys = {3, 4};
  rows.steps = {1, 1};
  rows.values = {1, 2, 3, 4};
  REQUIRE(writeTableShard(place, TableLayout{"emb", 2, static_cast<uint32_t>(kernels::OptimizerKind::kSgd), 0},
                          rows.ref(), 10, 0)
              .ok());
  std::vector<Outgoing> out;
  {
    ParamStore missing(1, place);
    missing.handle(1, 0, 0, declaration(11, 2), &out);  // no shard of step 11
    REQUIRE(wire::commandOf(out.back().data) == pb::CMD_ERROR);
    CHECK(out.back().data.error().user_error());
    CHECK_THAT(out.back().data.error().text(), Catch::Contains("-server-0-step-11.ckpt does not exist"));
  }
  {
    ParamStore other_dim(1, place);
    other_dim.handle(1, 0, 0, declaration(10, 3), &out);  // the shard holds dim 2
    REQUIRE(wire::commandOf(out.back().data) == pb::CMD_ERROR);
    CHECK(out.back().data.error().user_error());
    CHECK_THAT(out.back().data.error().text(), Catch::Contains("does not match table 'emb'"));
  }
  const std::string shard = tableShardPath(dir.path, "emb", 0, 10);
  {
    ParamStore good(1, place);
    good.handle(1, 0, 0, declaration(10, 2), &out);
    CHECK(wire::commandOf(out.back().data) == pb::CMD_REPLY);
    // The same table declared again with another dim: refused, but not a checkpoint's fault.
    good.handle(1, 0, 0, declaration(10, 3), &out);
    REQUIRE(wire::commandOf(out.back().data) == pb::CMD_ERROR);
    CHECK_FALSE(out.back().data.error().user_error());
  }
  {
    std::ofstream(shard, std::ios::binary | std::ios::app) << "x";  // one byte more than its header says
    ParamStore damaged(1, place);
    damaged.handle(1, 0, 0, declaration(10, 2), &out);
    REQUIRE(wire::commandOf(out.back().data) == pb::CMD_ERROR);
    CHECK(out.back().data.error().user_error());
    CHECK_THAT(out.back().data.error().text(), Catch::Contains(shard + " is corrupt"));
  }
}

}  // namespace
}  // namespace zps
