// Shared frame for the built-in worker programs (check, bench, later train): join the job through the
// public Worker API, run the body, report the result to the scheduler and turn it into an exit code.
#pragma once

#include <functional>

#include "zps/worker.h"

namespace zps {

// Exit codes: 2 for a bad environment, 1 when joining fails or the body fails, else what the job's end
// asks for (0 when every worker finished well).
int runWorkerProgram(const char* program, const std::function<Status(Worker&)>& body);

// Values chosen so every sum over up to 32 workers is exact in every dtype (small integers, exact even in
// bfloat16): worker w, round r, element i.
int64_t exactValue(int worker, uint64_t round, size_t element, DType dtype);
// Writes exactValue(worker, round, i) for i in [0, count) into `out` in the dtype's encoding.
void fillExact(void* out, size_t count, DType dtype, int worker, uint64_t round);
// Reads element i of a buffer of the given dtype as a double (exact for the values used here).
double readElement(const void* data, size_t i, DType dtype);

}  // namespace zps

#include <string>
#include <vector>

namespace zps {

// Parses "1,7,4K,1M+3,64M" (K/M/G = 2^10/2^20/2^30, "+N" adds bytes) into byte counts; `flag` names the
// flag in the error.
StatusOr<std::vector<size_t>> parseSizeList(const std::string& flag, const std::string& text);
// Parses "float32,float16" into dtypes ("all" = every dtype).
StatusOr<std::vector<DType>> parseDTypeList(const std::string& flag, const std::string& text);
std::string formatBytes(size_t bytes);

}  // namespace zps
