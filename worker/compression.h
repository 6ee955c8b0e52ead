// Push compression on the worker (include/zps/compression.h): which tensors compress, and the state
// that lives across rounds, namely each partition's compressor (with its error-feedback residual) and
// the payload buffers that in-flight sends and resends still hold.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/compressor.h"
#include "proto/zps.pb.h"
#include "ps/common/blob.h"
#include "ps/common/config.h"
#include "zps/worker.h"

namespace zps {

// One partition's push as it goes on the wire.
struct EncodedPush {
  Blob payload;
  pb::PayloadEncoding encoding = pb::ENCODING_DENSE;
  uint64_t sparse_count = 0;

  void describe(pb::Tensor* t) const {
    t->set_encoding(encoding);
    t->set_sparse_count(sparse_count);
  }
};

class TensorCompression {
 public:
  // The compressor of a tensor: the declare option when given (float32 tensors only), else ZPS_COMPRESSOR
  // for float32 tensors of at least ZPS_MIN_COMPRESS_BYTES. Async tensors take only an explicit option:
  // their pushes hold weights, which a default should not thin out. Null means dense pushes.
  static StatusOr<std::shared_ptr<TensorCompression>> choose(const Config& config, const DeclareOptions& options,
                                                             bool async, const std::string& name, size_t bytes,
                                                             DType dtype, const std::vector<PartitionInfo>& parts,
                                                             uint64_t seed);

  TensorCompression(Compressor kind, double ratio, const std::vector<PartitionInfo>& parts, uint64_t seed);
  Compressor kind() const { return kind_; }

  // Encodes one push of the tensor whose partitions were given to the constructor; `data` is the whole
  // tensor (partition offsets index it). Pushes of one tensor are encoded one at a time, in call order.
  std::vector<EncodedPush> encode(const void* data);

 private:
  struct Part {
    size_t offset;
    kernels::GradientCompressor compressor;
    std::vector<std::shared_ptr<AlignedBuffer>> buffers;  // reused once no send holds them
  };

  const Compressor kind_;
  std::mutex mu_;
  std::vector<Part> parts_;
};

}  // namespace zps
