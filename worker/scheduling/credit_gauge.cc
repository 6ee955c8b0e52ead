#include "worker/scheduling/credit_gauge.h"

#include <algorithm>

namespace zps {

CreditGauge::CreditGauge(size_t floor_bytes, size_t ceiling_bytes, int servers)
    : floor_(std::max<size_t>(1, floor_bytes)),
      ceiling_(std::max(floor_, ceiling_bytes)),
      servers_(std::max(1, servers)),
      credit_(floor_) {}

void CreditGauge::advanceBins(Clock::time_point now) {
  if (!started_) {
    started_ = true;
    bin_start_ = now;
    window_start_ = now;
    return;
  }
  // Bins the clock has passed since the newest one started are empty; after a second of silence all are.
  size_t passed = 0;
  while (now - bin_start_ >= kBin && passed < kBins) {
    bin_start_ += kBin;
    bin_index_ = (bin_index_ + 1) % kBins;
    bins_[bin_index_] = 0;
    ++passed;
  }
  if (now - bin_start_ >= kBin) bin_start_ = now;  // silent for longer than the ring: start afresh
}

size_t CreditGauge::acknowledged(size_t bytes, Clock::time_point sent, Clock::time_point now) {
  advanceBins(now);
  bins_[bin_index_] += bytes;
  if (now - window_start_ >= kRoundTripWindow / 2) {
    min_previous_ = min_current_;
    min_current_ = Clock::duration::max();
    window_start_ = now;
  }
  if (now >= sent) min_current_ = std::min(min_current_, now - sent);
  const double rate = rateBytesPerSecond();
  const double round_trip = std::chrono::duration<double>(minRoundTrip()).count();
  const double wanted = 2 * rate * round_trip / servers_;
  credit_ = std::clamp(static_cast<size_t>(wanted), floor_, ceiling_);
  return credit_;
}

double CreditGauge::rateBytesPerSecond() const {
  const uint64_t most = *std::max_element(bins_.begin(), bins_.end());
  return static_cast<double>(most) / std::chrono::duration<double>(kBin).count();
}

CreditGauge::Clock::duration CreditGauge::minRoundTrip() const {
  const Clock::duration shortest = std::min(min_current_, min_previous_);
  return shortest == Clock::duration::max() ? Clock::duration::zero() : shortest;
}

}  // namespace zps
