// MPI_Allreduce (float32 sum) latency and algorithm bandwidth, the all-reduce reference that
// tools/bench/compare.sh measures zps against. Built by compare.sh with mpicxx (Open MPI is not a zps
// dependency):  mpirun -np 2 mpi_allreduce 4096,1048576 0.5
// Algorithm bandwidth = bytes / time, as in nccl-tests, so it compares directly with zps bench's goodput
// per worker (each worker gets back the sum of `bytes`). Rank 0 prints one JSON object per size.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 3) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_allreduce BYTES[,BYTES...] MIN_SECONDS\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<size_t> sizes;
  std::stringstream list(argv[1]);
  for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::strtoull(item.c_str(), nullptr, 10));
  const double min_time = std::atof(argv[2]);
  int wrong = 0;
  for (size_t bytes : sizes) {
    const size_t n = std::max<size_t>(1, bytes / sizeof(float));
    std::vector<float> in(n, static_cast<float>(rank + 1)), out(n);
    const float expect = size * (size + 1) / 2.0f;
    // Warm up, then agree on an iteration count that takes about min_time (rank 0's estimate).
    double t0 = MPI_Wtime();
    for (int i = 0; i < 3; ++i)
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int iters = std::clamp(static_cast<int>(min_time / ((MPI_Wtime() - t0) / 3)), 5, 5000);
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<double> lat;
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      lat.push_back(MPI_Wtime() - start);
    }
    for (float v : out) wrong += v != expect;
    // The slowest rank's time is the collective's time.
    std::vector<double> slowest(lat.size());
    MPI_Reduce(lat.data(), slowest.data(), static_cast<int>(lat.size()), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::sort(slowest.begin(), slowest.end());
      double p50 = slowest[slowest.size() / 2];
      double p99 = slowest[std::min(slowest.size() - 1, slowest.size() * 99 / 100)];
      std::printf(
          "{\"test\":\"mpi_allreduce\",\"np\":%d,\"bytes\":%zu,\"iters\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,"
          "\"algbw_gbs\":%.6f}\n",
          size, n * sizeof(float), iters, p50 * 1e6, p99 * 1e6, n * sizeof(float) / p50 / 1e9);
      std::fflush(stdout);
    }
  }
  int any_wrong = 0;
  MPI_Reduce(&wrong, &any_wrong, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && any_wrong) std::fprintf(stderr, "mpi_allreduce: %d wrong values\n", any_wrong);
  MPI_Finalize();
  return any_wrong ? 1 : 0;
}
