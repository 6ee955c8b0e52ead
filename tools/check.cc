// `zps check`: pushes exact-arithmetic data for N rounds over a set of tensor sizes and dtypes and checks
// every pulled sum element by element. Exits non-zero on any wrong value.
//
// Tensors that ZPS_COMPRESSOR makes topk or randomk (docs/compression.md) cannot be exact
// round by round. For them check tests what error feedback promises: after the N rounds it pushes
// zeros for 2 x ceil(1 / ZPS_COMPRESS_RATIO) more rounds, by when every worker has sent all it held
// back, and then the pulled sums added over all rounds must equal the pushed values added up, exactly.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

#include "kernels/cuda_reducer.h"
#include "ps/common/config.h"
#include "tools/command_line.h"
#include "tools/programs.h"
#include "tools/worker_program.h"

ZPS_FLAG(check, std::string, sizes, "1,7,4K,1M+3,9M+5", "tensor sizes, e.g. 1,4K,1M+3 (K/M/G suffixes; +N adds bytes)");
ZPS_FLAG(check, int32_t, rounds, 10, "rounds of push-pull per tensor");
ZPS_FLAG(check, std::string, dtypes, "all", "dtypes to test (comma list or 'all')");
ZPS_FLAG(check, int32_t, threads, 1,
         "user threads that push-pull at the same time, each with its share of the tensors "
         "(dealt round-robin); exercises the worker API's thread safety");
ZPS_FLAG(check, bool, gpu_tensors, false,
         "keep the tensors in GPU memory (GPU local rank mod devices), so that local "
         "reduction goes through NCCL (or, with one local rank, pinned staging)");

namespace zps {
namespace {

// GPU memory owned by one check tensor (--gpu_tensors).
struct DeviceBytes {
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& other) noexcept : ptr(std::exchange(other.ptr, nullptr)) {}
  ~DeviceBytes() { kernels::deviceFree(ptr); }
  void* ptr = nullptr;
};

struct CheckTensor {
  std::string name;
  DType dtype;
  size_t count;
  TensorId id;
  std::vector<uint8_t> in, out;
  bool sparse = false;             // topk/randomk: checked on the totals over all rounds
  int64_t expected_total[8] = {};  // exactValue repeats every 8 elements
  std::vector<double> pulled_total;
  DeviceBytes device_in, device_out;  // --gpu_tensors: what is pushed and pulled
};

}  // namespace

int checkMain() {
  if (FLAGS_rounds < 1 || FLAGS_rounds > 1000000) {
    std::cerr << "zps check: --rounds must be between 1 and 1000000" << std::endl;
    return 2;
  }
  if (FLAGS_threads < 1 || FLAGS_threads > 64) {
    std::cerr << "zps check: --threads must be between 1 and 64" << std::endl;
    return 2;
  }
  auto sizes = parseSizeList("--sizes", FLAGS_sizes);
  auto dtypes = parseDTypeList("--dtypes", FLAGS_dtypes);
  for (const Status& s : {sizes.status(), dtypes.status()}) {
    if (!s.ok()) {
      std::cerr << "zps check: " << s.message() << std::endl;
      return 2;
    }
  }
  if (FLAGS_gpu_tensors) {
    // Probe the GPU this process will use (local rank mod devices, as the NCCL local reducer does):
    // probing device 0 would give every local rank a context there. A bad environment is reported
    // by runWorkerProgram below.
    auto config = loadConfig(processEnv(), Role::kWorker);
    std::string why;
    if (!kernels::cudaDeviceAvailable(&why, kernels::gpuOfLocalRank(config.ok() ? config->local_rank : 0))) {
      std::cerr << "zps check: --gpu_tensors but " << why << std::endl;
      return 2;
    }
  }
  return runWorkerProgram("check", [&](Worker& w) -> Status {
    std::vector<CheckTensor> tensors;
    size_t round_bytes = 0;
    for (size_t size : *sizes) {
      for (DType t : *dtypes) {
        CheckTensor c;
        c.dtype = t;
        c.count = std::max<size_t>(1, size / dtypeSize(t));
        c.name = "check/" + std::string(dtypeName(t)) + "/" + std::to_string(size);
        size_t bytes = c.count * dtypeSize(t);
        ZPS_ASSIGN_OR_RETURN(c.id, w.declare(c.name, bytes, t));
        const Compressor compressor = w.compressorOf(c.id);
        c.sparse = compressor == Compressor::kTopK || compressor == Compressor::kRandomK;
        if (c.sparse) c.pulled_total.assign(c.count, 0.0);
        c.in.resize(bytes);
        c.out.resize(bytes);
        if (FLAGS_gpu_tensors) {
          const int device = kernels::gpuOfLocalRank(w.localRank());
          ZPS_ASSIGN_OR_RETURN(c.device_in.ptr, kernels::deviceAlloc(device, bytes));
          ZPS_ASSIGN_OR_RETURN(c.device_out.ptr, kernels::deviceAlloc(device, bytes));
        }
        round_bytes += bytes;
        tensors.push_back(std::move(c));
      }
    }
    LOG(INFO) << "worker " << w.rank() << " declared " << tensors.size() << " tensors (" << formatBytes(round_bytes)
              << " per round) over " << w.numServers() << " servers";
    // With local reduction every process of a node contributes its own data; the sums cover them all.
    const int contributor = w.rank() * w.localSize() + w.localRank();
    const int contributors = w.numWorkers() * w.localSize();
    uint64_t drain_rounds = 0;
    if (std::any_of(tensors.begin(), tensors.end(), [](const CheckTensor& c) { return c.sparse; })) {
      ZPS_ASSIGN_OR_RETURN(Config config, loadConfig(processEnv(), Role::kWorker));
      drain_rounds = 2 * static_cast<uint64_t>(std::ceil(1 / config.compress_ratio));
      LOG(INFO) << "topk/randomk tensors are checked on their totals after " << drain_rounds << " more rounds of zeros";
    }
    auto start = std::chrono::steady_clock::now();
    // What one thread found; merged after all have finished.
    struct Tally {
      uint64_t wrong = 0, checked = 0;
      std::string first_wrong;
      void report(const std::string& what) {
        if (wrong++ < 5) {
          LOG(ERROR) << "wrong value: " << what;
          if (first_wrong.empty()) first_wrong = what;
        }
      }
    };
    const uint64_t data_rounds = static_cast<uint64_t>(FLAGS_rounds);
    // Every round of `mine`: fill, push-pull, wait, check.
    auto runRounds = [&](const std::vector<CheckTensor*>& mine, Tally& tally) -> Status {
      for (uint64_t round = 1; round <= data_rounds + drain_rounds; ++round) {
        const bool draining = round > data_rounds;
        std::vector<Handle> handles;
        for (CheckTensor* tensor : mine) {
          CheckTensor& c = *tensor;
          if (draining && !c.sparse) continue;
          if (draining)
            std::memset(c.in.data(), 0, c.in.size());
          else
            fillExact(c.in.data(), c.count, c.dtype, contributor, round);
          std::memset(c.out.data(), 0xAB, c.out.size());
          if (FLAGS_gpu_tensors) {
            ZPS_RETURN_IF_ERROR(kernels::copyBytes(c.device_in.ptr, c.in.data(), c.in.size()));
            ZPS_RETURN_IF_ERROR(kernels::copyBytes(c.device_out.ptr, c.out.data(), c.out.size()));
          }
          ZPS_ASSIGN_OR_RETURN(Handle h, FLAGS_gpu_tensors ? w.pushPull(c.id, c.device_in.ptr, c.device_out.ptr)
                                                           : w.pushPull(c.id, c.in.data(), c.out.data()));
          handles.push_back(h);
        }
        // Every handle is waited for, also after a failure (at once: a zero deadline cancels the
        // rest), so that no reply is copied into these buffers once the program returns.
        Status waited = Status::OK();
        for (Handle h : handles) {
          Status s = waited.ok() ? w.wait(h) : w.wait(h, std::chrono::milliseconds(0));
          if (waited.ok()) waited = s;
        }
        ZPS_RETURN_IF_ERROR(waited);
        if (FLAGS_gpu_tensors) {
          for (CheckTensor* c : mine)
            ZPS_RETURN_IF_ERROR(kernels::copyBytes(c->out.data(), c->device_out.ptr, c->out.size()));
        }
        for (CheckTensor* tensor : mine) {
          CheckTensor& c = *tensor;
          if (draining && !c.sparse) continue;
          // exactValue repeats every 8 elements, so the expected sums are a table of 8.
          int64_t expected_by_phase[8] = {};
          for (size_t phase = 0; phase < 8 && !draining; ++phase) {
            int64_t sum = 0;
            for (int k = 0; k < contributors; ++k) sum += exactValue(k, round, phase, c.dtype);
            expected_by_phase[phase] = c.dtype == DType::kUInt8 ? (sum & 0xFF) : sum;
            c.expected_total[phase] += expected_by_phase[phase];
          }
          for (size_t i = 0; i < c.count; ++i) {
            double got = readElement(c.out.data(), i, c.dtype);
            if (c.sparse) {
              c.pulled_total[i] += got;
              continue;
            }
            int64_t expect = expected_by_phase[i % 8];
            ++tally.checked;
            if (got != static_cast<double>(expect)) {
              std::ostringstream os;
              os << "'" << c.name << "' round " << round << " element " << i << ": got " << got << ", want " << expect;
              tally.report(os.str());
            }
          }
        }
        VLOG(1) << "round " << round << " done";
      }
      return Status::OK();
    };
    // Tensors dealt round-robin to the threads; the same tensor belongs to the same thread index on
    // every worker, and each thread runs its rounds independently of the others.
    const size_t threads = std::min<size_t>(static_cast<size_t>(FLAGS_threads), tensors.size());
    std::vector<std::vector<CheckTensor*>> shares(threads);
    for (size_t i = 0; i < tensors.size(); ++i) shares[i % threads].push_back(&tensors[i]);
    std::vector<Tally> tallies(threads);
    std::vector<Status> results(threads);
    {
      std::vector<std::thread> pool;
      for (size_t t = 1; t < threads; ++t) pool.emplace_back([&, t] { results[t] = runRounds(shares[t], tallies[t]); });
      results[0] = runRounds(shares[0], tallies[0]);
      for (auto& thread : pool) thread.join();
    }
    for (const Status& s : results) ZPS_RETURN_IF_ERROR(s);
    Tally tally;
    for (const Tally& t : tallies) {
      tally.wrong += t.wrong;
      tally.checked += t.checked;
      if (tally.first_wrong.empty()) tally.first_wrong = t.first_wrong;
    }
    for (const auto& c : tensors) {
      for (size_t i = 0; c.sparse && i < c.count; ++i) {
        ++tally.checked;
        if (c.pulled_total[i] != static_cast<double>(c.expected_total[i % 8])) {
          std::ostringstream os;
          os << "'" << c.name << "' total over " << data_rounds + drain_rounds << " rounds, element " << i << ": got "
             << c.pulled_total[i] << ", want " << c.expected_total[i % 8];
          tally.report(os.str());
        }
      }
    }
    const uint64_t wrong = tally.wrong;
    const uint64_t checked = tally.checked;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const TrafficCounters traffic = w.traffic();
    LOG(INFO) << "worker " << w.rank() << " pushed " << traffic.network_bytes_pushed << " network bytes for "
              << traffic.tensor_bytes_pushed << " tensor bytes";
    std::cout << "zps check: worker " << w.rank()
              << (w.localSize() > 1 ? " local rank " + std::to_string(w.localRank()) : "")
              << (FLAGS_gpu_tensors ? " (tensors in GPU memory)" : "")
              << (threads > 1 ? " (" + std::to_string(threads) + " threads)" : "") << ": " << FLAGS_rounds
              << " rounds x " << tensors.size() << " tensors (" << formatBytes(round_bytes) << " per round), "
              << checked << " values checked, " << wrong << " wrong, " << secs << " s" << std::endl;
    if (wrong > 0) return InternalError(std::to_string(wrong) + " wrong values; first: " + tally.first_wrong);
    return Status::OK();
  });
}

}  // namespace zps
