/* The C API from a C program, as a worker of a real job (run by capi_test.sh under zps launch).
 * Normal mode: exact sums of float32 and int64 tensors over several partitions and servers, poll, tables,
 * barrier and progress, and the status code and message of every kind of bad use.
 * With --fail-worker 1: worker 1 ends its part with an error; every other worker's wait must end with
 * ZPS_E_ABORTED and a message naming worker 1. Prints one line per check; exits non-zero on the first
 * failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zps/c_api.h"

static int g_rank = -1;

static void failCheck(const char* what, int code) {
  fprintf(stderr, "capi: worker %d: FAILED %s (code %d %s: %s)\n", g_rank, what, code, zps_status_name(code),
          zps_last_error());
  exit(1);
}

#define CHECK_OK(call)                            \
  do {                                            \
    int code_ = (call);                           \
    if (code_ != ZPS_OK) failCheck(#call, code_); \
  } while (0)

/* A bad call must fail with `code` and a message containing `needle`. */
static void expectError(const char* what, int got, int code, const char* needle) {
  if (got != code || strstr(zps_last_error(), needle) == NULL) {
    fprintf(stderr, "capi: worker %d: FAILED %s: expected %s with '%s', got %s: '%s'\n", g_rank, what,
            zps_status_name(code), needle, zps_status_name(got), zps_last_error());
    exit(1);
  }
  printf("capi: worker %d: %s -> %s: %s\n", g_rank, what, zps_status_name(got), zps_last_error());
}

static void badUseWithoutWorker(void) {
  int x = 0;
  zps_handle h = 0;
  float f = 0;
  expectError("rank of a null worker", zps_worker_rank(NULL, &x), ZPS_E_INVALID_ARGUMENT, "worker handle is null");
  expectError("push_pull on a null worker", zps_push_pull(NULL, 0, &f, &f, &h), ZPS_E_INVALID_ARGUMENT, "null");
  expectError("create into a null pointer", zps_worker_create(NULL), ZPS_E_INVALID_ARGUMENT, "out is null");
  expectError("wait on a null worker", zps_wait(NULL, 1, 10), ZPS_E_INVALID_ARGUMENT, "worker handle is null");
}

static void badUse(zps_worker* w, int tensor) {
  int id = -1, done = 0;
  zps_handle h = 0;
  float buf[4] = {0};
  expectError("push_pull of an unknown tensor", zps_push_pull(w, 999, buf, buf, &h), ZPS_E_INVALID_ARGUMENT,
              "tensor id 999 was not declared");
  expectError("declare 6 bytes of float32", zps_declare(w, "c/odd", 6, ZPS_FLOAT32, NULL, 0, &id),
              ZPS_E_INVALID_ARGUMENT, "not a positive multiple of 4");
  expectError("declare 0 bytes", zps_declare(w, "c/empty", 0, ZPS_FLOAT32, NULL, 0, &id), ZPS_E_INVALID_ARGUMENT,
              "0 bytes");
  expectError("declare dtype 42", zps_declare(w, "c/dtype", 8, 42, NULL, 0, &id), ZPS_E_INVALID_ARGUMENT, "dtype 42");
  expectError("declare in key space 0", zps_declare_in_set(w, "c/set", 8, ZPS_FLOAT32, 0, 1, &id),
              ZPS_E_INVALID_ARGUMENT, "key space 0");
  expectError("declare in key space 1024", zps_declare_in_set(w, "c/set", 8, ZPS_FLOAT32, 1024, 1, &id),
              ZPS_E_INVALID_ARGUMENT, "key space 1024");
  expectError("declare with 0 contributors", zps_declare_in_set(w, "c/set", 8, ZPS_FLOAT32, 1, 0, &id),
              ZPS_E_INVALID_ARGUMENT, "0 contributors");
  expectError("declare with compressor 'zip'", zps_declare(w, "c/zip", 8, ZPS_FLOAT32, "zip", 0, &id),
              ZPS_E_INVALID_ARGUMENT, "compressor 'zip'");
  expectError("push_pull of a null buffer", zps_push_pull(w, tensor, NULL, buf, &h), ZPS_E_INVALID_ARGUMENT,
              "data is null");
  expectError("push_pull into a null handle", zps_push_pull(w, tensor, buf, buf, NULL), ZPS_E_INVALID_ARGUMENT,
              "handle is null");
  expectError("wait on an unknown handle", zps_wait(w, 123456789, 10), ZPS_E_INVALID_ARGUMENT,
              "unknown or already waited handle");
  expectError("poll an unknown handle", zps_poll(w, 123456789, &done), ZPS_E_INVALID_ARGUMENT,
              "unknown or already waited handle");
  expectError("finish with status 77", zps_worker_finish(w, 77, "x", &done), ZPS_E_INVALID_ARGUMENT,
              "not a ZPS_* code");
}

enum { kElements = 3000 }; /* 12000 bytes: several partitions with ZPS_PARTITION_BYTES=4096 */

static void exactSums(zps_worker* w, int workers) {
  static float in[kElements], out[kElements];
  static int64_t in64[kElements], out64[kElements];
  int f32 = -1, i64 = -1;
  CHECK_OK(zps_declare(w, "c/f32", sizeof(in), ZPS_FLOAT32, NULL, 0, &f32));
  /* int64 by priority (zps_declare_prioritized): its push-pulls go through the scheduler's queues. */
  CHECK_OK(zps_declare_prioritized(w, "c/i64", sizeof(in64), ZPS_INT64, NULL, 0, 7, &i64));
  int scheduled = -1;
  int64_t priority = -1;
  CHECK_OK(zps_tensor_priority(w, i64, &scheduled, &priority));
  if (scheduled != 1 || priority != 7) {
    fprintf(stderr, "FAILED: zps_tensor_priority of c/i64: scheduled %d priority %lld (want 1, 7)\n", scheduled,
            (long long)priority);
    exit(1);
  }
  CHECK_OK(zps_tensor_priority(w, f32, &scheduled, &priority));
  if (scheduled != 0) {
    fprintf(stderr, "FAILED: c/f32 was declared without a priority but is scheduled\n");
    exit(1);
  }
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < kElements; ++i) {
      in[i] = (float)((g_rank + 1) * round + i % 7);
      in64[i] = ((int64_t)1 << 40) * (g_rank + 1) + i;
    }
    zps_handle a = 0, b = 0;
    CHECK_OK(zps_push_pull(w, f32, in, out, &a));
    CHECK_OK(zps_push_pull(w, i64, in64, out64, &b));
    int done = 0, polls = 0;
    /* poll until done (at most 10 s; the wait below then reports what is missing) */
    while (polls < 100000) {
      CHECK_OK(zps_poll(w, a, &done));
      ++polls;
      if (done) break;
      usleep(100);
    }
    CHECK_OK(zps_wait(w, a, 60000));
    CHECK_OK(zps_wait(w, b, -1));
    for (int i = 0; i < kElements; ++i) {
      float expect_f = (float)(workers * (workers + 1) / 2 * round + workers * (i % 7));
      int64_t expect_i = ((int64_t)1 << 40) * (workers * (workers + 1) / 2) + (int64_t)workers * i;
      if (out[i] != expect_f || out64[i] != expect_i) {
        fprintf(stderr, "capi: worker %d: FAILED round %d element %d: %g (want %g), %lld (want %lld)\n", g_rank, round,
                i, out[i], expect_f, (long long)out64[i], (long long)expect_i);
        exit(1);
      }
    }
    printf("capi: worker %d: round %d: float32 and int64 sums of %d elements exact (polled %d times)\n", g_rank, round,
           kElements, polls);
  }
  zps_traffic_counters t;
  CHECK_OK(zps_traffic(w, &t));
  if (t.tensor_bytes_pushed != 3 * (sizeof(in) + sizeof(in64)) || t.tensor_bytes_pulled != t.tensor_bytes_pushed) {
    fprintf(stderr, "capi: worker %d: FAILED traffic: %llu bytes pushed, %llu pulled\n", g_rank,
            (unsigned long long)t.tensor_bytes_pushed, (unsigned long long)t.tensor_bytes_pulled);
    exit(1);
  }
  printf("capi: worker %d: traffic: %llu tensor bytes pushed and pulled\n", g_rank,
         (unsigned long long)t.tensor_bytes_pushed);
  expectError("wait on an already waited handle", zps_wait(w, 1, 10), ZPS_E_INVALID_ARGUMENT,
              "unknown or already waited handle");
}

/* sgd with lr 0.5 on rows 5, 9, 1000003: after one round every row is x - 0.5 x (sum of the gradients). */
static void tableRound(zps_worker* w, int workers) {
  zps_table_options o;
  zps_table_options_default(&o);
  o.dim = 4;
  o.optimizer = "sgd";
  o.lr = 0.5f;
  int table = -1;
  CHECK_OK(zps_declare_table(w, "c/table", &o, &table));
  uint64_t keys[3] = {5, 9, 1000003};
  float before[12], grads[12], after[12];
  zps_handle h = 0;
  CHECK_OK(zps_pull_rows(w, table, keys, 3, before, &h));
  CHECK_OK(zps_wait(w, h, 60000));
  /* A prefetch before the push: held by the servers until every worker's round 1 is applied. */
  float prefetched[12];
  zps_handle prefetch = 0;
  CHECK_OK(zps_pull_rows_ahead(w, table, keys, 3, prefetched, 1, &prefetch));
  for (int i = 0; i < 12; ++i) grads[i] = (float)(i + 1);
  CHECK_OK(zps_push_rows(w, table, keys, 3, grads, &h));
  CHECK_OK(zps_wait(w, h, 60000));
  CHECK_OK(zps_pull_rows(w, table, keys, 3, after, &h));
  CHECK_OK(zps_wait(w, h, 60000));
  CHECK_OK(zps_wait(w, prefetch, 60000));
  if (memcmp(prefetched, after, sizeof(after)) != 0) {
    fprintf(stderr, "capi: worker %d: FAILED the prefetch issued before the push differs from the pull after it\n",
            g_rank);
    exit(1);
  }
  expectError("pull_rows_ahead 2 pushes ahead", zps_pull_rows_ahead(w, table, keys, 3, after, 2, &h),
              ZPS_E_INVALID_ARGUMENT, "at most 1 push ahead, not 2");
  for (int i = 0; i < 12; ++i) {
    float expect = before[i] - 0.5f * (float)(workers * (i + 1));
    if (after[i] != expect) {
      fprintf(stderr, "capi: worker %d: FAILED table value %d: %.9g, want %.9g\n", g_rank, i, after[i], expect);
      exit(1);
    }
  }
  printf("capi: worker %d: table round: 3 rows of 4 updated by sgd exactly (row 5[0] %.6f -> %.6f)\n", g_rank,
         before[0], after[0]);
  expectError("pull_rows of an unknown table", zps_pull_rows(w, 77, keys, 3, after, &h), ZPS_E_INVALID_ARGUMENT,
              "unknown table id");
  o.optimizer = "nesterov";
  expectError("table with optimizer 'nesterov'", zps_declare_table(w, "c/t2", &o, &table), ZPS_E_INVALID_ARGUMENT,
              "nesterov");
}

/* Worker 1 fails on purpose; the others must see the job aborted with worker 1 named. */
static int failWorker(zps_worker* w, int failing) {
  int id = -1, exit_code = -1;
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  CHECK_OK(zps_declare(w, "c/fail", sizeof(in), ZPS_FLOAT32, NULL, 0, &id));
  CHECK_OK(zps_barrier(w));
  if (g_rank == failing) {
    printf("capi: worker %d: failing on purpose\n", g_rank);
    fflush(stdout);
    CHECK_OK(zps_worker_finish(w, ZPS_E_INTERNAL, "the C test failed on purpose", &exit_code));
    zps_worker_destroy(w);
    sleep(3);                      /* zps launch stops the other workers once this one exits: let them report first */
    return exit_code == 0 ? 1 : 3; /* a failed worker's exit code must be non-zero */
  }
  zps_handle h = 0;
  /* The job may have ended before the push_pull starts: then it is the start that fails. */
  int code = zps_push_pull(w, id, in, out, &h);
  if (code == ZPS_OK) code = zps_wait(w, h, 60000);
  expectError("push_pull while worker 1 fails", code, ZPS_E_ABORTED, "worker 1");
  expectError("the reason is relayed", code, ZPS_E_ABORTED, "on purpose");
  CHECK_OK(zps_worker_finish(w, code, zps_last_error(), &exit_code));
  zps_worker_destroy(w);
  return exit_code == 0 ? 1 : 3;
}

int main(int argc, char** argv) {
  int failing = -1;
  if (argc == 3 && strcmp(argv[1], "--fail-worker") == 0) failing = atoi(argv[2]);
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line reaches zps launch at once, even if the job ends */
  printf("capi: C API version %s\n", zps_version());
  badUseWithoutWorker();
  zps_worker* w = NULL;
  CHECK_OK(zps_worker_create(&w));
  int workers = 0, servers = 0, local_rank = -1, local_size = 0;
  CHECK_OK(zps_worker_rank(w, &g_rank));
  CHECK_OK(zps_worker_num_workers(w, &workers));
  CHECK_OK(zps_worker_num_servers(w, &servers));
  CHECK_OK(zps_worker_local_rank(w, &local_rank));
  CHECK_OK(zps_worker_local_size(w, &local_size));
  printf("capi: worker %d of %d, %d servers, local rank %d of %d\n", g_rank, workers, servers, local_rank, local_size);
  if (failing >= 0) return failWorker(w, failing);
  exactSums(w, workers);
  tableRound(w, workers);
  badUse(w, 0);
  CHECK_OK(zps_barrier(w));
  CHECK_OK(zps_report_progress(w, 3, 0.25, 100.0, 1, 1));
  int exit_code = -1;
  CHECK_OK(zps_worker_finish(w, ZPS_OK, NULL, &exit_code));
  int rank = 0;
  expectError("rank after finish", zps_worker_rank(w, &rank), ZPS_E_FAILED_PRECONDITION, "finished");
  zps_worker_destroy(w);
  printf("capi: worker %d: finished with exit code %d\n", g_rank, exit_code);
  return exit_code;
}
