// Tests for key placement (worker/placement.cc): no byte is ever dropped or doubled, keys are
// unique, large tensors balance bytes, small tensors spread by count, and the result is
// deterministic so every worker computes the same placement.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "worker/placement.h"

namespace zps {
namespace {

// Checks that `parts` tile [0, bytes) exactly, in order, and obey the placement rules.
void checkTiling(const std::vector<PartitionInfo>& parts, int tensor_id, size_t bytes, size_t element_size,
                 size_t partition_bytes, int num_servers) {
  REQUIRE_FALSE(parts.empty());
  const size_t step = std::max(element_size, partition_bytes / element_size * element_size);
  CHECK(parts.size() == (bytes + step - 1) / step);
  size_t expected_offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const PartitionInfo& p = parts[i];
    INFO("partition " << i);
    CHECK(p.offset == expected_offset);
    CHECK(p.bytes > 0);
    CHECK(p.bytes <= step);
    CHECK(p.bytes % element_size == 0);
    if (i + 1 < parts.size()) CHECK(p.bytes == step);  // only the last one takes the remainder
    CHECK(p.server >= 0);
    CHECK(p.server < num_servers);
    CHECK(p.key >> kKeyPartitionBits == static_cast<uint64_t>(tensor_id));
    CHECK((p.key & ((uint64_t{1} << kKeyPartitionBits) - 1)) == i);
    expected_offset = p.offset + p.bytes;
  }
  CHECK(expected_offset == bytes);
}

TEST_CASE("placement: never drops bytes, whatever the server count and tensor size", "[placement]") {
  const size_t kPartition = 4096;
  // Sizes in bytes: tiny, odd, exact multiples of the partition size, just around them, large.
  const std::vector<size_t> uint8_sizes = {1,    2,    3,     7,     4095,  4096,  4097,   8191,
                                           8192, 8193, 12288, 65537, 99991, 40960, 409600, 1000003};
  const size_t float_elems[] = {1, 3, 1023, 1024, 1025, 2048, 3000, 10240, 250001};
  const size_t double_elems[] = {1, 511, 512, 513, 5000};
  for (int servers = 1; servers <= 9; ++servers) {
    INFO(servers << " servers");
    Placement placement(servers);
    std::set<uint64_t> keys;
    size_t total_parts = 0;
    int tensor_id = 0;
    auto placeAndCheck = [&](size_t bytes, size_t esize, size_t partition) {
      INFO("tensor " << tensor_id << ": " << bytes << " bytes, element " << esize << ", partition " << partition);
      auto parts = placement.place(tensor_id, bytes, esize, partition);
      checkTiling(parts, tensor_id, bytes, esize, partition, servers);
      for (const auto& p : parts) keys.insert(p.key);
      total_parts += parts.size();
      ++tensor_id;
    };
    for (size_t b : uint8_sizes) placeAndCheck(b, 1, kPartition);
    for (size_t n : float_elems) placeAndCheck(n * 4, 4, kPartition);
    for (size_t n : double_elems) placeAndCheck(n * 8, 8, kPartition);
    // A partition size that is not a multiple of the element size is rounded down to elements.
    for (size_t n : float_elems) placeAndCheck(n * 4, 4, 4099);
    for (size_t n : double_elems) placeAndCheck(n * 8, 8, 100);
    // A partition size smaller than one element still makes progress (one element each).
    placeAndCheck(8 * 17, 8, 3);
    CHECK(keys.size() == total_parts);  // keys unique across all tensors
    uint64_t load_sum = 0;
    for (uint64_t l : placement.load()) load_sum += l;
    size_t bytes_sum = 0;
    for (size_t b : uint8_sizes) bytes_sum += b;
    for (size_t n : float_elems) bytes_sum += 2 * n * 4;
    for (size_t n : double_elems) bytes_sum += 2 * n * 8;
    bytes_sum += 8 * 17;
    CHECK(load_sum == bytes_sum + total_parts * kPerMessageCost);
  }
}

TEST_CASE("placement: a partition size smaller than one element gives one element each", "[placement]") {
  Placement placement(2);
  auto parts = placement.place(3, 40, 8, 3);
  REQUIRE(parts.size() == 5);
  for (size_t i = 0; i < parts.size(); ++i) {
    CHECK(parts[i].bytes == 8);
    CHECK(parts[i].offset == i * 8);
  }
}

TEST_CASE("placement: large tensors balance bytes across servers", "[placement]") {
  const size_t kPartition = 1 << 20;
  for (int servers = 1; servers <= 9; ++servers) {
    INFO(servers << " servers");
    Placement placement(servers);
    int id = 0;
    for (size_t bytes : {size_t{100} << 20, size_t{37} << 20, (size_t{5} << 20) + 12, size_t{3} << 20, size_t{64} << 20,
                         (size_t{1} << 20) + 4, size_t{200} << 20}) {
      auto parts = placement.place(id++, bytes, 4, kPartition);
      REQUIRE_FALSE(parts.empty());
      auto [lo, hi] = std::minmax_element(placement.load().begin(), placement.load().end());
      CHECK(*hi - *lo <= kPartition + kPerMessageCost);
    }
    // The bytes per server (without the per-message cost) are balanced too.
    Placement fresh(servers);
    std::vector<uint64_t> bytes_per_server(servers, 0);
    for (const auto& p : fresh.place(0, size_t{256} << 20, 4, kPartition)) bytes_per_server[p.server] += p.bytes;
    auto [lo, hi] = std::minmax_element(bytes_per_server.begin(), bytes_per_server.end());
    CHECK(*hi - *lo <= kPartition);
  }
}

TEST_CASE("placement: many small tensors spread out by count", "[placement]") {
  Placement placement(4);
  std::vector<int> count(4, 0);
  for (int t = 0; t < 100; ++t) {
    auto parts = placement.place(t, 4, 4, 4 << 20);
    REQUIRE(parts.size() == 1);
    CHECK(parts[0].bytes == 4);
    CHECK(parts[0].offset == 0);
    CHECK(parts[0].key == static_cast<uint64_t>(t) << kKeyPartitionBits);
    ++count[parts[0].server];
  }
  for (int s = 0; s < 4; ++s) {
    INFO("server " << s);
    CHECK(count[s] >= 24);
    CHECK(count[s] <= 26);
  }
  // Ties go to the lowest rank, so the first four tensors land on servers 0, 1, 2, 3.
  Placement again(4);
  for (int t = 0; t < 4; ++t) CHECK(again.place(t, 4, 4, 4 << 20)[0].server == t);
}

TEST_CASE("placement: small tensors do not pile onto the server after a large one", "[placement]") {
  Placement placement(3);
  auto big = placement.place(0, 10 << 20, 4, 16 << 20);  // one 10 MiB partition
  REQUIRE(big.size() == 1);
  CHECK(big[0].server == 0);
  for (int t = 1; t <= 20; ++t) CHECK(placement.place(t, 64, 4, 16 << 20)[0].server != 0);
}

TEST_CASE("placement: two Placement objects give identical results", "[placement]") {
  for (int servers : {1, 2, 3, 5, 8}) {
    Placement a(servers);
    Placement b(servers);
    for (int t = 0; t < 50; ++t) {
      size_t esize = (t % 3 == 0) ? 2 : 4;
      size_t bytes = esize * (1 + (static_cast<size_t>(t) * 7919) % 300000);
      auto pa = a.place(t, bytes, esize, 65536);
      auto pb = b.place(t, bytes, esize, 65536);
      REQUIRE(pa.size() == pb.size());
      for (size_t i = 0; i < pa.size(); ++i) {
        CHECK(pa[i].key == pb[i].key);
        CHECK(pa[i].server == pb[i].server);
        CHECK(pa[i].offset == pb[i].offset);
        CHECK(pa[i].bytes == pb[i].bytes);
      }
    }
    CHECK(a.load() == b.load());
  }
}

}  // namespace
}  // namespace zps
