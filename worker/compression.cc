#include "worker/compression.h"

namespace zps {

StatusOr<std::shared_ptr<TensorCompression>> TensorCompression::choose(
    const Config& config, const DeclareOptions& options, bool async, const std::string& name, size_t bytes, DType dtype,
    const std::vector<PartitionInfo>& parts, uint64_t seed) {
  double ratio = options.compress_ratio == 0 ? config.compress_ratio : options.compress_ratio;
  if (!(ratio > 0 && ratio <= 1))
    return InvalidArgument("tensor '" + name + "': compress_ratio " + std::to_string(ratio) + " is not in (0, 1]");
  Compressor kind = Compressor::kNone;
  if (options.compressor) {
    kind = *options.compressor;
    if (kind != Compressor::kNone && dtype != DType::kFloat32)
      return InvalidArgument("tensor '" + name + "': the " + std::string(compressorName(kind)) +
                             " compressor needs float32, not " + std::string(dtypeName(dtype)));
  } else if (!async && dtype == DType::kFloat32 && bytes >= config.min_compress_bytes) {
    kind = config.compressor;
  }
  if (kind == Compressor::kNone) return std::shared_ptr<TensorCompression>();
  return std::make_shared<TensorCompression>(kind, ratio, parts, seed);
}

TensorCompression::TensorCompression(Compressor kind, double ratio, const std::vector<PartitionInfo>& parts,
                                     uint64_t seed)
    : kind_(kind) {
  parts_.reserve(parts.size());
  for (const auto& p : parts)
    parts_.push_back(
        Part{p.offset, kernels::GradientCompressor(kind, ratio, p.bytes / sizeof(float), seed ^ p.key), {}});
}

std::vector<EncodedPush> TensorCompression::encode(const void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EncodedPush> out(parts_.size());
  for (size_t i = 0; i < parts_.size(); ++i) {
    Part& p = parts_[i];
    std::shared_ptr<AlignedBuffer> buf;
    for (auto& b : p.buffers) {
      if (b.use_count() == 1) {  // no send or kept resend references it any more
        buf = b;
        break;
      }
    }
    if (!buf) {
      buf = std::make_shared<AlignedBuffer>(p.compressor.maxPayloadBytes());
      p.buffers.push_back(buf);
    }
    size_t count = 0;
    size_t bytes = p.compressor.compress(static_cast<const uint8_t*>(data) + p.offset, buf->data(), &count);
    out[i].payload = Blob(buf, buf->data(), bytes);
    out[i].encoding = kind_ == Compressor::kFp16 ? pb::ENCODING_FP16 : pb::ENCODING_SPARSE;
    out[i].sparse_count = count;
  }
  return out;
}

}  // namespace zps
