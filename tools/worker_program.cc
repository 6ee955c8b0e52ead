#include "tools/worker_program.h"

#include <glog/logging.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "kernels/reducer.h"
#include "ps/node/signals.h"

namespace zps {

int runWorkerProgram(const char* program, const std::function<Status(Worker&)>& body) {
  auto worker = Worker::create();
  if (!worker.ok()) {
    const Status& s = worker.status();
    std::cerr << "zps " << program << ": " << s.message() << std::endl;
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Status result = body(**worker);
  if (!result.ok()) LOG(ERROR) << "zps " << program << " on worker " << (*worker)->rank() << ": " << result.message();
  int code = (*worker)->finish(result);
  if (terminationRequested()) return 0;  // asked to stop: the goodbye went to the scheduler
  // A user error (bad flag, bad data) keeps its exit code 2 after the job has been ended for everyone.
  if (!result.ok() && result.code() == StatusCode::kInvalidArgument) return 2;
  return code;
}

int64_t exactValue(int worker, uint64_t round, size_t element, DType dtype) {
  int64_t v = static_cast<int64_t>((element * 7 + round * 3 + static_cast<uint64_t>(worker) * 5) % 8);
  // Signed types also get negative values; uint8 sums stay below 256 for up to 36 workers.
  return dtype == DType::kUInt8 ? v : v - 4;
}

void fillExact(void* out, size_t count, DType dtype, int worker, uint64_t round) {
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < count; ++i) {
    int64_t v = exactValue(worker, round, i, dtype);
    switch (dtype) {
      case DType::kFloat32: {
        float f = static_cast<float>(v);
        std::memcpy(bytes + i * 4, &f, 4);
        break;
      }
      case DType::kFloat64: {
        double d = static_cast<double>(v);
        std::memcpy(bytes + i * 8, &d, 8);
        break;
      }
      case DType::kFloat16: {
        uint16_t h = kernels::floatToHalf(static_cast<float>(v));
        std::memcpy(bytes + i * 2, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t b = kernels::floatToBfloat16(static_cast<float>(v));
        std::memcpy(bytes + i * 2, &b, 2);
        break;
      }
      case DType::kInt32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(bytes + i * 4, &x, 4);
        break;
      }
      case DType::kInt64: std::memcpy(bytes + i * 8, &v, 8); break;
      case DType::kUInt8: bytes[i] = static_cast<uint8_t>(v); break;
    }
  }
}

double readElement(const void* data, size_t i, DType dtype) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, bytes + i * 4, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, bytes + i * 8, 8);
      return d;
    }
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, bytes + i * 2, 2);
      return kernels::halfToFloat(h);
    }
    case DType::kBFloat16: {
      uint16_t b;
      std::memcpy(&b, bytes + i * 2, 2);
      return kernels::bfloat16ToFloat(b);
    }
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, bytes + i * 4, 4);
      return x;
    }
    case DType::kInt64: {
      int64_t x;
      std::memcpy(&x, bytes + i * 8, 8);
      return static_cast<double>(x);
    }
    case DType::kUInt8: return bytes[i];
  }
  return 0;
}

}  // namespace zps

namespace zps {

namespace {

// "a,,b" -> {"a", "b"}: empty items are skipped.
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

StatusOr<std::vector<size_t>> parseSizeList(const std::string& flag, const std::string& text) {
  std::vector<size_t> sizes;
  for (const std::string& item : splitList(text)) {
    size_t plus = item.find('+');
    std::string base = item.substr(0, plus);
    uint64_t extra = 0;
    char* end = nullptr;
    if (plus != std::string::npos) {
      extra = std::strtoull(item.c_str() + plus + 1, &end, 10);
      if (*end != '\0') return InvalidArgument(flag + ": '" + item + "' is not a size like 4K, 1M or 1M+3");
    }
    uint64_t mult = 1;
    if (!base.empty() && std::strchr("kKmMgG", base.back()) != nullptr) {
      char u = static_cast<char>(std::toupper(base.back()));
      mult = u == 'K' ? 1024 : u == 'M' ? 1024 * 1024 : 1024ull * 1024 * 1024;
      base.pop_back();
    }
    if (base.empty() || base.find_first_not_of("0123456789") != std::string::npos || base.size() > 10)
      return InvalidArgument(flag + ": '" + item + "' is not a size like 4K, 1M or 1M+3");
    uint64_t bytes = std::stoull(base) * mult + extra;
    if (bytes == 0 || bytes > (uint64_t{4} << 30))
      return InvalidArgument(flag + ": '" + item + "' must be between 1 byte and 4G");
    sizes.push_back(static_cast<size_t>(bytes));
  }
  if (sizes.empty()) return InvalidArgument(flag + " is empty; give sizes like 4K,1M");
  return sizes;
}

StatusOr<std::vector<DType>> parseDTypeList(const std::string& flag, const std::string& text) {
  std::vector<DType> out;
  if (text == "all") {
    for (int i = 0; i < kNumDTypes; ++i) out.push_back(static_cast<DType>(i));
    return out;
  }
  for (const std::string& item : splitList(text)) {
    auto t = dtypeFromName(item);
    if (!t)
      return InvalidArgument(flag + ": '" + item +
                             "' is not a dtype (float32, float16, bfloat16, float64, int32, int64, uint8 or all)");
    out.push_back(*t);
  }
  if (out.empty()) return InvalidArgument(flag + " is empty");
  return out;
}

std::string formatBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 3 && static_cast<uint64_t>(v) % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return std::to_string(bytes) + " B";
  return std::to_string(static_cast<uint64_t>(v)) + " " + units[u];
}

}  // namespace zps
