// The C API (include/zps/c_api.h) over zps::Worker. Each function checks its pointers, calls the worker,
// turns a Status into its code and keeps its message in a thread-local string for zps_last_error. No C++
// exception crosses the C edge: one escaping the worker (std::bad_alloc) becomes ZPS_E_INTERNAL.
#include "zps/c_api.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <glog/logging.h>

#include "ps/common/setting.h"
#include "worker/placement.h"
#include "zps/worker.h"

// The opaque handle: owns the Worker; created by zps_worker_create, freed by zps_worker_destroy.
struct zps_worker {
  std::unique_ptr<zps::Worker> worker;
  std::atomic<bool> finished{false};  // after zps_worker_finish, only destroy is valid
};

namespace {

thread_local std::string last_error;

int fail(zps::StatusCode code, std::string message) {
  last_error = std::move(message);
  return static_cast<int>(code);
}

int report(const zps::Status& s) {
  if (s.ok()) return ZPS_OK;
  return fail(s.code(), s.message());
}

// Runs `body` (returning a Status) with the checks every worker call shares.
template <typename Body>
int guarded(const zps_worker* w, const char* what, Body body) {
  if (w == nullptr) return fail(zps::StatusCode::kInvalidArgument, std::string(what) + ": the worker handle is null");
  if (w->finished.load())
    return fail(zps::StatusCode::kFailedPrecondition, std::string(what) + ": the worker has finished");
  try {
    return report(body(*w->worker));
  } catch (const std::exception& e) {
    return fail(zps::StatusCode::kInternal, std::string(what) + ": " + e.what());
  }
}

int nullArgument(const char* what, const char* argument) {
  return fail(zps::StatusCode::kInvalidArgument, std::string(what) + ": " + argument + " is null");
}

std::optional<zps::DType> dtypeOf(int dtype) {
  if (dtype < 0) return std::nullopt;
  return zps::dtypeFromInt(static_cast<uint64_t>(dtype));
}

zps::Status badDtype(int dtype) {
  return zps::InvalidArgument("dtype " + std::to_string(dtype) + " is not one of ZPS_FLOAT32..ZPS_UINT8 (0.." +
                              std::to_string(zps::kNumDTypes - 1) + ")");
}

template <typename Fn>
int startOp(zps_worker* w, const char* what, zps_handle* handle, Fn start) {
  if (handle == nullptr) return nullArgument(what, "handle");
  return guarded(w, what, [&](zps::Worker& worker) -> zps::Status {
    zps::StatusOr<zps::Handle> h = start(worker);
    if (!h.ok()) return h.status();
    *handle = *h;
    return zps::Status::OK();
  });
}

// A declare's shared part: checks the name, the id's pointer and the dtype, then stores the id that
// `declare(worker, dtype)` returns.
template <typename Declare>
int declareWith(zps_worker* w, const char* what, const char* name, int dtype, int* id_out, Declare declare) {
  if (name == nullptr) return nullArgument(what, "name");
  if (id_out == nullptr) return nullArgument(what, "tensor_id");
  return guarded(w, what, [&](zps::Worker& worker) -> zps::Status {
    auto type = dtypeOf(dtype);
    if (!type) return badDtype(dtype);
    zps::StatusOr<int> id = declare(worker, *type);
    if (!id.ok()) return id.status();
    *id_out = *id;
    return zps::Status::OK();
  });
}

template <typename Getter>
int getInt(const zps_worker* w, int* out, const char* what, Getter get) {
  if (out == nullptr) return nullArgument(what, "out");
  return guarded(w, what, [&](zps::Worker& worker) {
    *out = get(worker);
    return zps::Status::OK();
  });
}

// The setting `name`, or a failed status naming what the caller asked for.
zps::StatusOr<const zps::Setting*> settingNamed(const char* what, const char* name) {
  if (name == nullptr) return zps::InvalidArgument(std::string(what) + ": name is null");
  const zps::Setting* s = zps::findSetting(name);
  if (s == nullptr) return zps::NotFound(std::string(what) + ": '" + name + "' is not a setting (zps help env)");
  return s;
}

// The setting's string fields are string_views into constants, so NUL-terminated copies are kept for
// the life of the process, made once per setting and field.
const char* keptString(std::string_view text) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::string>, std::less<>> kept;
  std::lock_guard<std::mutex> lock(mu);
  auto it = kept.find(text);
  if (it == kept.end()) it = kept.emplace(std::string(text), std::make_unique<std::string>(text)).first;
  return it->second->c_str();
}

template <typename Body>
int withSetting(const char* what, const char* name, Body body) {
  zps::StatusOr<const zps::Setting*> s = settingNamed(what, name);
  if (!s.ok()) return report(s.status());
  return report(body(**s));
}

// zps_declare's options from its C arguments.
zps::StatusOr<zps::DeclareOptions> declareOptions(const char* name, const char* compressor, double compress_ratio) {
  zps::DeclareOptions options;
  if (compressor != nullptr) {
    options.compressor = zps::compressorFromName(compressor);
    if (!options.compressor)
      return zps::InvalidArgument("tensor '" + std::string(name) + "': compressor '" + compressor + "' is not " +
                                  std::string(zps::kCompressorNames));
  }
  options.compress_ratio = compress_ratio;
  return options;
}
}  // namespace

extern "C" {

const char* zps_last_error(void) { return last_error.c_str(); }

const char* zps_status_name(int code) {
  if (code < 0 || code > static_cast<int>(zps::StatusCode::kInternal)) return "UNKNOWN";
  return zps::statusCodeName(static_cast<zps::StatusCode>(code));
}

const char* zps_version(void) { return ZPS_VERSION; }

int zps_max_process_sets(void) { return static_cast<int>(zps::kMaxKeySpaces) - 1; }

const char* zps_dtype_name(int dtype) {
  auto type = dtypeOf(dtype);
  return type ? keptString(zps::dtypeName(*type)) : nullptr;
}

int zps_setting_default(const char* name, const char** text) {
  if (text == nullptr) return nullArgument("zps_setting_default", "text");
  return withSetting("zps_setting_default", name, [&](const zps::Setting& s) {
    *text = keptString(s.default_text);
    return zps::Status::OK();
  });
}

int zps_setting_variable(const char* name, const char** variable) {
  if (variable == nullptr) return nullArgument("zps_setting_variable", "variable");
  return withSetting("zps_setting_variable", name, [&](const zps::Setting& s) {
    *variable = keptString(s.env.empty() ? std::string_view() : s.env.front());
    return zps::Status::OK();
  });
}

int zps_setting_range(const char* name, int64_t* min, int64_t* max) {
  if (min == nullptr || max == nullptr) return nullArgument("zps_setting_range", "min or max");
  return withSetting("zps_setting_range", name, [&](const zps::Setting& s) {
    if (s.type != zps::SettingType::kInteger)
      return zps::InvalidArgument("zps_setting_range: " + std::string(s.name) + " is not a whole number");
    *min = s.min;
    *max = s.max;
    return zps::Status::OK();
  });
}

int zps_setting_integer(const char* name, int64_t* value) {
  if (value == nullptr) return nullArgument("zps_setting_integer", "value");
  return withSetting("zps_setting_integer", name, [&](const zps::Setting& s) -> zps::Status {
    if (s.type != zps::SettingType::kInteger || s.accepts_auto)
      return zps::InvalidArgument("zps_setting_integer: " + std::string(s.name) + " is not a whole number");
    zps::StatusOr<long long> n = zps::readInteger(zps::processEnv(), s);
    if (!n.ok()) return n.status();
    *value = *n;
    return zps::Status::OK();
  });
}

int zps_worker_create(zps_worker** out) {
  if (out == nullptr) return nullArgument("zps_worker_create", "out");
  *out = nullptr;
  try {
    // The worker logs through glog, to stderr as the zps binary does; the host process (Python with
    // PyTorch, which uses glog too) may have initialised it already.
    if (!google::IsGoogleLoggingInitialized()) {
      FLAGS_logtostderr = true;
      google::InitGoogleLogging("zps");
    }
    auto worker = zps::Worker::create();
    if (!worker.ok()) return report(worker.status());
    auto* w = new zps_worker;
    w->worker = std::move(worker).value();
    *out = w;
    return ZPS_OK;
  } catch (const std::exception& e) {
    return fail(zps::StatusCode::kInternal, std::string("zps_worker_create: ") + e.what());
  }
}

int zps_worker_finish(zps_worker* w, int status, const char* message, int* exit_code) {
  if (exit_code == nullptr) return nullArgument("zps_worker_finish", "exit_code");
  if (status < 0 || status > static_cast<int>(zps::StatusCode::kInternal))
    return fail(zps::StatusCode::kInvalidArgument,
                "zps_worker_finish: status " + std::to_string(status) + " is not a ZPS_* code");
  int code = guarded(w, "zps_worker_finish", [&](zps::Worker& worker) {
    zps::Status result(static_cast<zps::StatusCode>(status), message != nullptr ? message : "");
    if (status != ZPS_OK && result.message().empty()) result = zps::Status(result.code(), "the worker program failed");
    *exit_code = worker.finish(result);
    return zps::Status::OK();
  });
  if (code == ZPS_OK) w->finished.store(true);
  return code;
}

void zps_worker_destroy(zps_worker* w) { delete w; }

int zps_worker_rank(const zps_worker* w, int* out) {
  return getInt(w, out, "zps_worker_rank", [](zps::Worker& x) { return x.rank(); });
}
int zps_worker_num_workers(const zps_worker* w, int* out) {
  return getInt(w, out, "zps_worker_num_workers", [](zps::Worker& x) { return x.numWorkers(); });
}
int zps_worker_num_servers(const zps_worker* w, int* out) {
  return getInt(w, out, "zps_worker_num_servers", [](zps::Worker& x) { return x.numServers(); });
}
int zps_worker_local_rank(const zps_worker* w, int* out) {
  return getInt(w, out, "zps_worker_local_rank", [](zps::Worker& x) { return x.localRank(); });
}
int zps_worker_local_size(const zps_worker* w, int* out) {
  return getInt(w, out, "zps_worker_local_size", [](zps::Worker& x) { return x.localSize(); });
}

int zps_declare(zps_worker* w, const char* name, uint64_t bytes, int dtype, const char* compressor,
                double compress_ratio, int* tensor_id) {
  return declareWith(
      w, "zps_declare", name, dtype, tensor_id, [&](zps::Worker& worker, zps::DType type) -> zps::StatusOr<int> {
        ZPS_ASSIGN_OR_RETURN(zps::DeclareOptions options, declareOptions(name, compressor, compress_ratio));
        return worker.declare(name, bytes, type, options);
      });
}

int zps_declare_prioritized(zps_worker* w, const char* name, uint64_t bytes, int dtype, const char* compressor,
                            double compress_ratio, int64_t priority, int* tensor_id) {
  return declareWith(w, "zps_declare_prioritized", name, dtype, tensor_id,
                     [&](zps::Worker& worker, zps::DType type) -> zps::StatusOr<int> {
                       ZPS_ASSIGN_OR_RETURN(zps::DeclareOptions options,
                                            declareOptions(name, compressor, compress_ratio));
                       options.priority = priority;
                       return worker.declare(name, bytes, type, options);
                     });
}

int zps_declare_in_set(zps_worker* w, const char* name, uint64_t bytes, int dtype, uint32_t key_space, int contributors,
                       int* tensor_id) {
  return declareWith(w, "zps_declare_in_set", name, dtype, tensor_id,
                     [&](zps::Worker& worker, zps::DType type) -> zps::StatusOr<int> {
                       if (key_space == 0)
                         return zps::InvalidArgument("tensor '" + std::string(name) +
                                                     "': key space 0 is every "
                                                     "worker's; a process set's is 1..1023");
                       zps::DeclareOptions options;
                       options.compressor = zps::Compressor::kNone;
                       options.unscheduled = true;
                       options.key_space = key_space;
                       options.contributors = contributors;
                       return worker.declare(name, bytes, type, options);
                     });
}

int zps_tensor_priority(const zps_worker* w, int tensor_id, int* scheduled, int64_t* priority) {
  if (scheduled == nullptr) return nullArgument("zps_tensor_priority", "scheduled");
  if (priority == nullptr) return nullArgument("zps_tensor_priority", "priority");
  return guarded(w, "zps_tensor_priority", [&](zps::Worker& worker) {
    const std::optional<int64_t> p = worker.priorityOf(tensor_id);
    *scheduled = p ? 1 : 0;
    *priority = p.value_or(0);
    return zps::Status::OK();
  });
}

int zps_declare_async(zps_worker* w, const char* name, uint64_t bytes, int dtype, int* tensor_id) {
  return declareWith(w, "zps_declare_async", name, dtype, tensor_id,
                     [&](zps::Worker& worker, zps::DType type) { return worker.declareAsync(name, bytes, type); });
}

void zps_table_options_default(zps_table_options* options) {
  if (options == nullptr) return;
  static const zps::TableOptions defaults;
  options->dim = defaults.dim;
  options->optimizer = "adagrad";
  options->lr = defaults.lr;
  options->momentum = defaults.momentum;
  options->beta1 = defaults.beta1;
  options->beta2 = defaults.beta2;
  options->eps = defaults.eps;
  options->initial_accumulator = defaults.initial_accumulator;
  options->init_scale = defaults.init_scale;
  options->seed = defaults.seed;
  options->async = defaults.async;
  options->restore_step = defaults.restore_step;
}

int zps_declare_table(zps_worker* w, const char* name, const zps_table_options* options, int* table_id) {
  const char* what = "zps_declare_table";
  if (name == nullptr) return nullArgument(what, "name");
  if (options == nullptr) return nullArgument(what, "options");
  if (options->optimizer == nullptr) return nullArgument(what, "options->optimizer");
  if (table_id == nullptr) return nullArgument(what, "table_id");
  return guarded(w, what, [&](zps::Worker& worker) -> zps::Status {
    zps::TableOptions o;
    o.dim = options->dim;
    o.optimizer = options->optimizer;
    o.lr = options->lr;
    o.momentum = options->momentum;
    o.beta1 = options->beta1;
    o.beta2 = options->beta2;
    o.eps = options->eps;
    o.initial_accumulator = options->initial_accumulator;
    o.init_scale = options->init_scale;
    o.seed = options->seed;
    o.async = options->async;
    o.restore_step = options->restore_step;
    auto id = worker.declareTable(name, o);
    if (!id.ok()) return id.status();
    *table_id = *id;
    return zps::Status::OK();
  });
}

int zps_push(zps_worker* w, int tensor_id, const void* data, zps_handle* handle) {
  if (data == nullptr) return nullArgument("zps_push", "data");
  return startOp(w, "zps_push", handle, [&](zps::Worker& x) { return x.push(tensor_id, data); });
}

int zps_pull(zps_worker* w, int tensor_id, void* out, zps_handle* handle) {
  if (out == nullptr) return nullArgument("zps_pull", "out");
  return startOp(w, "zps_pull", handle, [&](zps::Worker& x) { return x.pull(tensor_id, out); });
}

int zps_push_pull(zps_worker* w, int tensor_id, const void* data, void* out, zps_handle* handle) {
  if (data == nullptr) return nullArgument("zps_push_pull", "data");
  if (out == nullptr) return nullArgument("zps_push_pull", "out");
  return startOp(w, "zps_push_pull", handle, [&](zps::Worker& x) { return x.pushPull(tensor_id, data, out); });
}

int zps_pull_rows(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, float* out, zps_handle* handle) {
  if (n > 0 && keys == nullptr) return nullArgument("zps_pull_rows", "keys");
  if (n > 0 && out == nullptr) return nullArgument("zps_pull_rows", "out");
  return startOp(w, "zps_pull_rows", handle,
                 [&](zps::Worker& x) { return x.pullRows(table_id, keys, static_cast<size_t>(n), out); });
}

int zps_pull_rows_ahead(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, float* out, uint32_t ahead,
                        zps_handle* handle) {
  if (n > 0 && keys == nullptr) return nullArgument("zps_pull_rows_ahead", "keys");
  if (n > 0 && out == nullptr) return nullArgument("zps_pull_rows_ahead", "out");
  return startOp(w, "zps_pull_rows_ahead", handle,
                 [&](zps::Worker& x) { return x.pullRowsAhead(table_id, keys, static_cast<size_t>(n), out, ahead); });
}

int zps_push_rows(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, const float* grads,
                  zps_handle* handle) {
  if (n > 0 && keys == nullptr) return nullArgument("zps_push_rows", "keys");
  if (n > 0 && grads == nullptr) return nullArgument("zps_push_rows", "grads");
  return startOp(w, "zps_push_rows", handle,
                 [&](zps::Worker& x) { return x.pushRows(table_id, keys, static_cast<size_t>(n), grads); });
}

int zps_wait(zps_worker* w, zps_handle handle, int64_t timeout_ms) {
  return guarded(w, "zps_wait", [&](zps::Worker& x) {
    return timeout_ms < 0 ? x.wait(handle) : x.wait(handle, std::chrono::milliseconds(timeout_ms));
  });
}

int zps_poll(const zps_worker* w, zps_handle handle, int* done) {
  if (done == nullptr) return nullArgument("zps_poll", "done");
  return guarded(w, "zps_poll", [&](zps::Worker& x) -> zps::Status {
    auto ended = x.poll(handle);
    if (!ended.ok()) return ended.status();
    *done = *ended ? 1 : 0;
    return zps::Status::OK();
  });
}

int zps_traffic(const zps_worker* w, zps_traffic_counters* out) {
  if (out == nullptr) return nullArgument("zps_traffic", "out");
  return guarded(w, "zps_traffic", [&](zps::Worker& x) {
    const zps::TrafficCounters t = x.traffic();
    *out = {t.tensor_bytes_pushed, t.network_bytes_pushed, t.tensor_bytes_pulled, t.network_bytes_pulled};
    return zps::Status::OK();
  });
}

int zps_barrier(zps_worker* w) {
  return guarded(w, "zps_barrier", [](zps::Worker& x) { return x.barrier(); });
}

int zps_report_progress(zps_worker* w, uint64_t step, double loss, double samples_per_sec, uint64_t epoch,
                        uint64_t epochs) {
  return guarded(w, "zps_report_progress", [&](zps::Worker& x) {
    x.reportTrainingProgress(step, loss, samples_per_sec, epoch, epochs);
    return zps::Status::OK();
  });
}

}  // extern "C"
