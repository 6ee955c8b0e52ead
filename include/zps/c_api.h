/* The zps C API: the worker API (zps/worker.h) for bindings (Python's zps package, others later) and for
 * C programs. Shared library: libzps_c.so.
 *
 * Errors: every function returns an int status code, ZPS_OK (0) on success, else one of the ZPS_E_*
 * codes below. The message of the last failed call on the calling thread is zps_last_error(); it stays
 * valid until the next failing call on that thread (a successful call leaves it as it was).
 *
 *   zps_worker* w;
 *   if (zps_worker_create(&w) != ZPS_OK) { fprintf(stderr, "%s\n", zps_last_error()); return 2; }
 *   int grad;
 *   zps_declare(w, "grad", n * sizeof(float), ZPS_FLOAT32, &grad);
 *   zps_handle h;
 *   zps_push_pull(w, grad, local, summed, &h);        // asynchronous
 *   zps_wait(w, h, 60000);                              // every wait has a deadline (milliseconds)
 *   int exit_code = 1;
 *   zps_worker_finish(w, ZPS_OK, NULL, &exit_code);     // ends the job
 *   zps_worker_destroy(w);
 *
 * Threads: a zps_worker may be used from several threads at once, as zps::Worker may. Buffers passed to
 * push/pull/push_pull/pull_rows/push_rows must stay valid and unchanged until zps_wait on the handle
 * returns. Nothing in this header depends on C++, ZeroMQ or CUDA. */
#ifndef ZPS_C_API_H_
#define ZPS_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the values of zps::StatusCode, which never change. */
enum {
  ZPS_OK = 0,
  ZPS_E_INVALID_ARGUMENT = 1,  /* the caller gave a bad value (null handle, unknown tensor, wrong size) */
  ZPS_E_DEADLINE_EXCEEDED = 2, /* a wait expired; the message says what it waited for */
  ZPS_E_UNAVAILABLE = 3,       /* a peer cannot be reached or went away */
  ZPS_E_PROTOCOL = 4,
  ZPS_E_NOT_FOUND = 5,
  ZPS_E_ALREADY_EXISTS = 6,
  ZPS_E_FAILED_PRECONDITION = 7,
  ZPS_E_ABORTED = 8, /* the job was ended (by the scheduler: another worker failed, or a signal) */
  ZPS_E_INTERNAL = 9
};

/* Element types: the values of zps::DType (they travel on the wire and never change). */
enum {
  ZPS_FLOAT32 = 0,
  ZPS_FLOAT16 = 1,
  ZPS_BFLOAT16 = 2,
  ZPS_FLOAT64 = 3,
  ZPS_INT32 = 4,
  ZPS_INT64 = 5,
  ZPS_UINT8 = 6
};

typedef struct zps_worker zps_worker; /* opaque; one per process */
typedef uint64_t zps_handle;          /* an operation in flight, released by zps_wait */

/* The message of the calling thread's last failed call ("" when none failed yet). Never NULL. */
const char* zps_last_error(void);
/* "OK", "INVALID_ARGUMENT", ... for a status code; "UNKNOWN" outside the enum. */
const char* zps_status_name(int code);
/* The library's version, e.g. "0.1.0". */
const char* zps_version(void);
/* "float32", "float16", ... for a dtype code (ZPS_FLOAT32...); NULL outside the enum. Bindings build their
 * tables of dtypes from it instead of copying the codes. */
const char* zps_dtype_name(int dtype);

/* The settings of docs/configuration.md, by the name of their flag (e.g. "torch_bucket_bytes"), so that
 * bindings ask the library for a setting's default, range and variable instead of copying them. The
 * strings stay valid for the life of the process. ZPS_E_NOT_FOUND for a name that is no setting. */
/* The default as users write it ("1048576", "auto"); "" when it has none. */
int zps_setting_default(const char* name, const char** text);
/* The first environment variable that sets it (e.g. "ZPS_TORCH_BUCKET_BYTES"); "" for a flag alone. */
int zps_setting_variable(const char* name, const char** variable);
/* The range of a whole-number setting; ZPS_E_INVALID_ARGUMENT for a setting of another type. */
int zps_setting_range(const char* name, int64_t* min, int64_t* max);
/* Reads a whole-number setting from the process's environment, as zps reads its own (the first variable
 * set wins, else the default) and validated the same way: ZPS_E_INVALID_ARGUMENT with a message that
 * names the variable and says what to set it to. */
int zps_setting_integer(const char* name, int64_t* value);

/* Joins the job described by the environment (DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER,
 * DMLC_NUM_WORKER, ...). Blocks at most the rendezvous timeout. ZPS_E_INVALID_ARGUMENT: a bad
 * environment (exit code 2 is the convention). */
int zps_worker_create(zps_worker** out);
/* Reports this worker's result (status ZPS_OK, or an error code with a message naming the failure, which
 * the scheduler relays to every other node), waits for the job to end and stores the process exit code
 * (0 when the job completed and status is ZPS_OK) in *exit_code. Call once; then only destroy. */
int zps_worker_finish(zps_worker* w, int status, const char* message, int* exit_code);
/* Frees the worker. NULL is accepted. */
void zps_worker_destroy(zps_worker* w);

int zps_worker_rank(const zps_worker* w, int* out);
int zps_worker_num_workers(const zps_worker* w, int* out);
int zps_worker_num_servers(const zps_worker* w, int* out);
int zps_worker_local_rank(const zps_worker* w, int* out);
int zps_worker_local_size(const zps_worker* w, int* out);

/* Declares a dense tensor of `bytes` bytes (a positive multiple of the dtype's size). Every worker must
 * declare the same tensors (name, bytes, dtype) in the same order; a server refuses a mismatch with a
 * message naming both. compressor: NULL for the default (ZPS_COMPRESSOR), else "none", "fp16", "topk" or
 * "randomk"; compress_ratio: 0 for ZPS_COMPRESS_RATIO. */
int zps_declare(zps_worker* w, const char* name, uint64_t bytes, int dtype, const char* compressor,
                double compress_ratio, int* tensor_id);
/* zps_declare with a priority (docs/performance.md#priority-scheduling): the tensor's push-pulls wait in
 * their server's queue behind those of lower priority (give the layer the next forward pass needs first
 * the lowest), with at most ZPS_CREDIT_BYTES in flight per server, whatever ZPS_PRIORITY says. */
int zps_declare_prioritized(zps_worker* w, const char* name, uint64_t bytes, int dtype, const char* compressor,
                            double compress_ratio, int64_t priority, int* tensor_id);
/* *scheduled = 1 and *priority = the tensor's priority when its push-pulls are scheduled by priority
 * (zps_declare_prioritized, or ZPS_PRIORITY=1), else *scheduled = 0. */
int zps_tensor_priority(const zps_worker* w, int tensor_id, int* scheduled, int64_t* priority);
/* The most process sets a job can have: key spaces of zps_declare_in_set are 1..zps_max_process_sets(). */
int zps_max_process_sets(void);
/* A process set's tensor (zps.torch's process sets): only the set's `contributors` members declare it,
 * in the same order, and each round sums their pushes. key_space (1..zps_max_process_sets(), the same on every member,
 * one per set for the job) keeps its keys apart from every other tensor's. Not compressed, not scheduled. Members are
 * processes: with ZPS_LOCAL_SIZE > 1 each member pushes the whole tensor itself (no local reduction; host memory only),
 * and contributors may be up to workers x local size. */
int zps_declare_in_set(zps_worker* w, const char* name, uint64_t bytes, int dtype, uint32_t key_space, int contributors,
                       int* tensor_id);
/* An async tensor: no rounds; the servers keep a running sum of every push; a pull returns it as it is. */
int zps_declare_async(zps_worker* w, const char* name, uint64_t bytes, int dtype, int* tensor_id);

/* A server-side table (param mode). Fill with zps_table_options_default, then change what you need. */
typedef struct zps_table_options {
  uint32_t dim;
  const char* optimizer; /* "sgd", "momentum", "adam" or "adagrad" */
  float lr;
  float momentum, beta1, beta2, eps, initial_accumulator;
  float init_scale; /* new rows are uniform in [-init_scale, init_scale] */
  uint64_t seed;
  int async;             /* -1: from ZPS_ENABLE_ASYNC; 0: sync; 1: async */
  uint64_t restore_step; /* > 0: load the servers' shards checkpointed at this step */
} zps_table_options;

void zps_table_options_default(zps_table_options* options);
int zps_declare_table(zps_worker* w, const char* name, const zps_table_options* options, int* table_id);

/* Start operations; the handle is released by zps_wait. */
int zps_push(zps_worker* w, int tensor_id, const void* data, zps_handle* handle);
int zps_pull(zps_worker* w, int tensor_id, void* out, zps_handle* handle);
int zps_push_pull(zps_worker* w, int tensor_id, const void* data, void* out, zps_handle* handle);
/* n keys; out receives n x dim floats, grads holds n x dim floats. */
int zps_pull_rows(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, float* out, zps_handle* handle);
/* A prefetch: with ahead = 1, the rows as a zps_pull_rows issued after this worker's next zps_push_rows
 * would see them (sync tables: held by the servers until that round is applied; async: served at once,
 * lacking at most that push). ahead = 0 is zps_pull_rows; more is ZPS_E_INVALID_ARGUMENT. */
int zps_pull_rows_ahead(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, float* out, uint32_t ahead,
                        zps_handle* handle);
int zps_push_rows(zps_worker* w, int table_id, const uint64_t* keys, uint64_t n, const float* grads,
                  zps_handle* handle);

/* Waits for an operation for at most timeout_ms milliseconds (< 0: ZPS_REQUEST_TIMEOUT) and releases the
 * handle. ZPS_E_DEADLINE_EXCEEDED names the partitions and servers still outstanding; ZPS_E_ABORTED means
 * the job ended (the message says why, e.g. which worker failed). */
int zps_wait(zps_worker* w, zps_handle handle, int64_t timeout_ms);
/* Non-blocking: *done = 1 when the operation has ended (zps_wait then returns at once), 0 while it is in
 * flight. ZPS_E_INVALID_ARGUMENT for an unknown or already waited handle. */
int zps_poll(const zps_worker* w, zps_handle handle, int* done);

/* Bytes this process handed to push/pull and bytes it moved over the network for them (compression
 * makes the pushed network bytes smaller). */
typedef struct zps_traffic_counters {
  uint64_t tensor_bytes_pushed;
  uint64_t network_bytes_pushed;
  uint64_t tensor_bytes_pulled;
  uint64_t network_bytes_pulled;
} zps_traffic_counters;
int zps_traffic(const zps_worker* w, zps_traffic_counters* out);

/* Waits until every worker reached this barrier. */
int zps_barrier(zps_worker* w);

/* The training program's latest step, loss and throughput (zps status, the dashboard, /metrics); epoch
 * (1-based) of epochs, or 0, 0 when the program does not train in epochs. Cheap. */
int zps_report_progress(zps_worker* w, uint64_t step, double loss, double samples_per_sec, uint64_t epoch,
                        uint64_t epochs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZPS_C_API_H_ */
