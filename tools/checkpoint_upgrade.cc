// `zps checkpoint upgrade DIR [--servers N]`: converts the checkpoint files of format version 1 in
// DIR to version 2 (ps/common/checkpoint_v1.h, ps/common/checkpoint.h), in place, so that a job
// checkpointed by an older zps resumes. Run it once per folder, while no job uses the folder.
//
// A version 1 file lacks the job shape that version 2 records; the upgrade takes it from where it is:
// the step from the file's header (checked against its name), the server rank from a shard's name,
// the table's name from the start of its payload, the job id from the folder's `job-id` (drawn now
// when the folder has none, as a job would), and the number of servers from --servers or, without it,
// the highest server rank among the folder's shards plus one. A restore checks every row against the
// server that owns it under that number (table_checkpoint.h), so a wrong number is refused there,
// never mixed in. Table shards move from their version 1 names (by key) to version 2's (by table
// name); dense files keep theirs. Payloads are copied unchanged.
//
// Every version 1 file is read and checked before anything is written: a damaged or foreign one
// stops the upgrade with exit 2, naming it, and leaves the folder as it was. Each file is then
// rewritten atomically, and a shard's old file is removed only once its new one is durable, so an
// upgrade cut short is finished by running it again. Files already of version 2 are left alone.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "ps/common/checkpoint.h"
#include "ps/common/checkpoint_dir.h"
#include "ps/common/checkpoint_v1.h"
#include "ps/server/table_checkpoint.h"
#include "tools/command_line.h"
#include "tools/programs.h"

ZPS_FLAG(checkpoint, int32_t, servers, 0,
         "the number of servers of the job that wrote the folder (0: the highest server rank among its shards "
         "plus one; give it when the folder holds some servers' shards only, as with a folder per server pod)");

namespace zps {
namespace {

// One version 1 file and the version 2 file it becomes.
struct Conversion {
  std::string from;
  std::string to;
  CheckpointShape shape;  // of the version 2 file (num_servers filled in once all shards are known)
};

struct Plan {
  std::vector<Conversion> files;
  size_t current = 0;    // checkpoint files already of version 2
  uint32_t servers = 0;  // recorded in every converted shard
};

// The table's name at the start of a shard payload (table_checkpoint.h's format).
StatusOr<std::string> tableNameOf(const std::string& path, const std::string& payload) {
  PayloadReader r(payload);
  uint32_t length = 0;
  if (!r.get(&length) || length > kMaxCheckpointTableName || length > r.remaining())
    return InvalidArgument("checkpoint " + path + " is corrupt: its payload names no table");
  std::string name(length, '\0');
  r.getBytes(name.data(), length);
  return name;
}

// A version 1 file, read and checked against the kind and step its name gives.
StatusOr<CheckpointFile> readOld(const std::string& path, CheckpointKind kind, uint64_t step) {
  ZPS_ASSIGN_OR_RETURN(CheckpointFile f, readVersion1CheckpointFile(path));
  if (f.shape.kind != kind)
    return InvalidArgument("checkpoint " + path + " holds kind " + std::to_string(static_cast<uint32_t>(f.shape.kind)) +
                           ", which its name does not");
  if (f.shape.step != step)
    return InvalidArgument("checkpoint " + path + " records step " + std::to_string(f.shape.step) +
                           " but its name says step " + std::to_string(step));
  return f;
}

// Whether `path` needs converting: true for version 1, false for version 2, an error otherwise.
StatusOr<bool> isVersion1(const std::string& path) {
  ZPS_ASSIGN_OR_RETURN(uint32_t version, checkpointFormatVersion(path));
  if (version == 1) return true;
  if (version == 2) return false;
  return InvalidArgument("checkpoint " + path + " has format version " + std::to_string(version) +
                         ", which this zps neither reads nor converts");
}

// Pass 1: finds and checks every version 1 file of `dir` and plans its version 2 file. Writes nothing.
StatusOr<Plan> planUpgrade(const std::string& dir, uint64_t job_id, uint32_t servers_flag) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  if (ec) return InvalidArgument("cannot list " + dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  const std::regex old_shard("table-[0-9]+-server-([0-9]{1,9})-step-([0-9]{1,19})\\.ckpt");
  Plan plan;
  uint32_t highest_rank = 0;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::smatch m;
    const std::optional<uint64_t> dense_step = stepInFileName(name, "dense-step-", ".ckpt");
    const bool shard = std::regex_match(name, m, old_shard);
    if (!dense_step && !shard) continue;  // `latest`, `job-id`, version 2 shards
    ZPS_ASSIGN_OR_RETURN(bool old, isVersion1(path));
    if (!old) {
      ++plan.current;
      continue;
    }
    Conversion c;
    c.from = path;
    c.shape.job_id = job_id;
    if (dense_step) {
      ZPS_RETURN_IF_ERROR(readOld(path, CheckpointKind::kDenseModel, *dense_step).status());
      c.to = path;
      c.shape.kind = CheckpointKind::kDenseModel;
      c.shape.step = *dense_step;
    } else {
      const uint64_t step = std::stoull(m[2]);
      ZPS_ASSIGN_OR_RETURN(CheckpointFile f, readOld(path, CheckpointKind::kParamTable, step));
      ZPS_ASSIGN_OR_RETURN(c.shape.table, tableNameOf(path, f.payload));
      c.shape.kind = CheckpointKind::kParamTable;
      c.shape.step = step;
      c.shape.server_rank = static_cast<uint32_t>(std::stoul(m[1]));
      if (c.shape.server_rank >= kMaxCheckpointServers)
        return InvalidArgument("checkpoint " + path + " names server " + m[1].str() + ", out of range");
      highest_rank = std::max(highest_rank, c.shape.server_rank);
      c.to = tableShardPath(dir, c.shape.table, c.shape.server_rank, step);
    }
    plan.files.push_back(std::move(c));
  }
  plan.servers = servers_flag > 0 ? servers_flag : highest_rank + 1;
  for (Conversion& c : plan.files) {
    if (c.shape.kind != CheckpointKind::kParamTable) continue;
    if (c.shape.server_rank >= plan.servers)
      return InvalidArgument("checkpoint " + c.from + " is server " + std::to_string(c.shape.server_rank) +
                             "'s shard, but --servers says the job had " + std::to_string(plan.servers));
    c.shape.num_servers = plan.servers;
  }
  return plan;
}

// Pass 2: writes each planned file (reading its version 1 file again: one payload in memory at a time).
Status applyUpgrade(const Plan& plan) {
  for (const Conversion& c : plan.files) {
    ZPS_ASSIGN_OR_RETURN(CheckpointFile f, readVersion1CheckpointFile(c.from));
    ZPS_RETURN_IF_ERROR(writeCheckpointFile(c.to, c.shape, f.payload));
    if (c.to != c.from) {
      std::error_code ec;
      std::filesystem::remove(c.from, ec);
      if (ec) return Unavailable("removing " + c.from + " after writing " + c.to + ": " + ec.message());
    }
    std::cout << "zps checkpoint upgrade: " << c.from << " -> "
              << (c.to == c.from ? std::string("version 2 in place") : c.to) << " (" << c.shape.describe() << ")"
              << std::endl;
  }
  return Status::OK();
}

int upgradeMain(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::cerr << "zps checkpoint upgrade: " << dir << " is not a folder" << std::endl;
    return 2;
  }
  if (FLAGS_servers < 0 || static_cast<uint32_t>(FLAGS_servers) > kMaxCheckpointServers) {
    std::cerr << "zps checkpoint upgrade: --servers " << FLAGS_servers << " is out of range (1 to "
              << kMaxCheckpointServers << ", or 0 to count the shards)" << std::endl;
    return 2;
  }
  // The folder's job id, drawn now when it has none; also proves the folder can be written.
  auto job = prepareCheckpointDir(dir);
  if (!job.ok()) {
    std::cerr << "zps checkpoint upgrade: " << job.status().message() << std::endl;
    return 2;
  }
  auto plan = planUpgrade(dir, *job, static_cast<uint32_t>(FLAGS_servers));
  if (!plan.ok()) {
    std::cerr << "zps checkpoint upgrade: " << plan.status().message() << "; nothing was changed" << std::endl;
    return 2;
  }
  if (Status s = applyUpgrade(*plan); !s.ok()) {
    std::cerr << "zps checkpoint upgrade: " << s.message() << "; run the upgrade again once that is fixed" << std::endl;
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  size_t shards = 0;
  for (const Conversion& c : plan->files) shards += c.shape.kind == CheckpointKind::kParamTable ? 1 : 0;
  std::cout << "zps checkpoint upgrade: " << dir << ": " << plan->files.size() << " file(s) converted to version 2 ("
            << plan->files.size() - shards << " dense, " << shards << " table shard(s)";
  if (shards > 0) std::cout << " of a job of " << plan->servers << " server(s)";
  std::cout << "), " << plan->current << " already of version 2" << std::endl;
  auto latest = readLatestStep(dir);
  if (latest.ok()) std::cout << "zps checkpoint upgrade: " << dir << "/latest names step " << *latest << std::endl;
  return 0;
}

}  // namespace

int checkpointMain(const std::vector<std::string>& args) {
  if (args.size() != 2 || args[0] != "upgrade") {
    std::cerr << "usage: zps checkpoint upgrade DIR [--servers N]" << std::endl;
    return 2;
  }
  return upgradeMain(args[1]);
}

}  // namespace zps
