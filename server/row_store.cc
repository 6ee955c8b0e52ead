#include "server/row_store.h"

#include <algorithm>
#include <cstring>

#include "kernels/reducer.h"

namespace zps {
namespace {

uint16_t narrow(RowFormat format, float v) {
  return format == RowFormat::kFloat16 ? kernels::floatToHalf(v) : kernels::floatToBfloat16(v);
}

float widen(RowFormat format, uint16_t v) {
  return format == RowFormat::kFloat16 ? kernels::halfToFloat(v) : kernels::bfloat16ToFloat(v);
}

// Grows by an eighth, not the doubling std::vector does by itself: a table near its memory budget
// then holds at most an eighth more than the rows it is charged for.
template <typename T>
void growFor(std::vector<T>* v, size_t more) {
  const size_t need = v->size() + more;
  if (need > v->capacity()) v->reserve(std::max(need, v->capacity() + v->capacity() / 8 + 64 * more));
}

}  // namespace

StatusOr<RowFormat> rowFormatFromName(const std::string& name) {
  if (name == "float32" || name.empty()) return RowFormat::kFloat32;
  if (name == "float16") return RowFormat::kFloat16;
  if (name == "bfloat16") return RowFormat::kBfloat16;
  return InvalidArgument("ZPS_TABLE_ROW_FORMAT=" + name + " is not one of float32, float16, bfloat16");
}

const char* rowFormatName(RowFormat format) {
  switch (format) {
    case RowFormat::kFloat16: return "float16";
    case RowFormat::kBfloat16: return "bfloat16";
    case RowFormat::kFloat32: break;
  }
  return "float32";
}

uint64_t RowStore::rowBytes(uint32_t dim, uint32_t state_floats, RowFormat format) {
  const uint64_t value_bytes = format == RowFormat::kFloat32 ? sizeof(float) : sizeof(uint16_t);
  return dim * value_bytes + uint64_t{state_floats} * dim * sizeof(float) + kRowOverhead;
}

uint64_t RowStore::rowBytes() const {
  return rowBytes(dim_, dim_ == 0 ? 0 : static_cast<uint32_t>(state_count_ / dim_), format_);
}

uint32_t RowStore::find(uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? kNoRow : it->second;
}

uint32_t RowStore::add(uint64_t key, const float* values, const float* state, uint64_t updates, uint64_t tick) {
  const auto slot = static_cast<uint32_t>(keys_.size());
  growFor(&keys_, 1);
  growFor(&updates_, 1);
  growFor(&last_used_, 1);
  growFor(&older_, 1);
  growFor(&newer_, 1);
  growFor(&flags_, 1);
  growFor(&state_, state_count_);
  index_.emplace(key, slot);
  keys_.push_back(key);
  updates_.push_back(updates);
  last_used_.push_back(tick);
  older_.push_back(kNoRow);
  newer_.push_back(kNoRow);
  flags_.push_back(kChanged);
  ++changed_count_;
  if (format_ == RowFormat::kFloat32) {
    growFor(&values_, dim_);
    values_.insert(values_.end(), values, values + dim_);
  } else {
    growFor(&values16_, dim_);
    for (uint32_t j = 0; j < dim_; ++j) values16_.push_back(narrow(format_, values[j]));
  }
  if (state != nullptr) {
    state_.insert(state_.end(), state, state + state_count_);
  } else {
    state_.resize(state_.size() + state_count_, 0.0f);
  }
  pushNewest(slot);
  return slot;
}

void RowStore::unlink(uint32_t slot) {
  const uint32_t older = older_[slot], newer = newer_[slot];
  if (older != kNoRow) newer_[older] = newer;
  if (newer != kNoRow) older_[newer] = older;
  if (lru_oldest_ == slot) lru_oldest_ = newer;
  if (lru_newest_ == slot) lru_newest_ = older;
  older_[slot] = newer_[slot] = kNoRow;
}

void RowStore::pushNewest(uint32_t slot) {
  older_[slot] = lru_newest_;
  newer_[slot] = kNoRow;
  if (lru_newest_ != kNoRow) newer_[lru_newest_] = slot;
  lru_newest_ = slot;
  if (lru_oldest_ == kNoRow) lru_oldest_ = slot;
}

void RowStore::relink(uint32_t from, uint32_t to) {
  older_[to] = older_[from];
  newer_[to] = newer_[from];
  if (older_[to] != kNoRow) newer_[older_[to]] = to;
  if (newer_[to] != kNoRow) older_[newer_[to]] = to;
  if (lru_oldest_ == from) lru_oldest_ = to;
  if (lru_newest_ == from) lru_newest_ = to;
}

void RowStore::touch(uint32_t slot, uint64_t tick) {
  last_used_[slot] = tick;
  if (lru_newest_ == slot) return;
  unlink(slot);
  pushNewest(slot);
}

void RowStore::remove(uint32_t slot) {
  if ((flags_[slot] & kCheckpointed) != 0) removed_.push_back(keys_[slot]);
  if ((flags_[slot] & kChanged) != 0) --changed_count_;
  unlink(slot);
  index_.erase(keys_[slot]);
  const auto last = static_cast<uint32_t>(keys_.size() - 1);
  if (slot != last) {
    keys_[slot] = keys_[last];
    updates_[slot] = updates_[last];
    last_used_[slot] = last_used_[last];
    flags_[slot] = flags_[last];
    relink(last, slot);
    index_[keys_[slot]] = slot;
    if (format_ == RowFormat::kFloat32) {
      std::memcpy(&values_[size_t{slot} * dim_], &values_[size_t{last} * dim_], dim_ * sizeof(float));
    } else {
      std::memcpy(&values16_[size_t{slot} * dim_], &values16_[size_t{last} * dim_], dim_ * sizeof(uint16_t));
    }
    if (state_count_ > 0)
      std::memcpy(&state_[slot * state_count_], &state_[last * state_count_], state_count_ * sizeof(float));
  }
  keys_.pop_back();
  updates_.pop_back();
  last_used_.pop_back();
  older_.pop_back();
  newer_.pop_back();
  flags_.pop_back();
  if (format_ == RowFormat::kFloat32) {
    values_.resize(values_.size() - dim_);
  } else {
    values16_.resize(values16_.size() - dim_);
  }
  state_.resize(state_.size() - state_count_);
}

void RowStore::markChanged(uint32_t slot) {
  if ((flags_[slot] & kChanged) == 0) ++changed_count_;
  flags_[slot] |= kChanged;
}

uint64_t RowStore::nextUpdate(uint32_t slot) {
  markChanged(slot);
  return ++updates_[slot];
}

void RowStore::readValues(uint32_t slot, float* out) const {
  const size_t base = size_t{slot} * dim_;
  if (format_ == RowFormat::kFloat32) {
    std::memcpy(out, &values_[base], dim_ * sizeof(float));
    return;
  }
  for (uint32_t j = 0; j < dim_; ++j) out[j] = widen(format_, values16_[base + j]);
}

void RowStore::writeValues(uint32_t slot, const float* in) {
  markChanged(slot);
  const size_t base = size_t{slot} * dim_;
  if (format_ == RowFormat::kFloat32) {
    std::memcpy(&values_[base], in, dim_ * sizeof(float));
    return;
  }
  for (uint32_t j = 0; j < dim_; ++j) values16_[base + j] = narrow(format_, in[j]);
}

void RowStore::copyRows(bool changed_only, TableRows* out) const {
  const size_t n = changed_only ? changed_count_ : keys_.size();
  out->keys.reserve(out->keys.size() + n);
  out->steps.reserve(out->steps.size() + n);
  out->values.reserve(out->values.size() + n * dim_);
  out->state.reserve(out->state.size() + n * state_count_);
  for (uint32_t slot = 0; slot < keys_.size(); ++slot) {
    if (changed_only && (flags_[slot] & kChanged) == 0) continue;
    out->keys.push_back(keys_[slot]);
    out->steps.push_back(updates_[slot]);
    const size_t v = out->values.size();
    out->values.resize(v + dim_);
    readValues(slot, out->values.data() + v);
    out->state.insert(out->state.end(), state_.begin() + slot * state_count_,
                      state_.begin() + (slot + 1) * state_count_);
  }
}

void RowStore::markCheckpointed() {
  std::fill(flags_.begin(), flags_.end(), kCheckpointed);
  changed_count_ = 0;
  removed_.clear();
}

}  // namespace zps
