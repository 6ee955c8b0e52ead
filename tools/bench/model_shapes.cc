#include "tools/bench/model_shapes.h"

#include <algorithm>

namespace zps {
namespace {

// Appends tensors in forward (declaration) order; modelTensors reverses them at the end.
struct Builder {
  std::vector<ModelTensor> forward;
  void add(const std::string& name, uint64_t elements) { forward.push_back({name, elements, 0}); }
  void batchNorm(const std::string& name, uint64_t channels) {
    add(name + ".weight", channels);
    add(name + ".bias", channels);
  }
  void layerNorm(const std::string& name, uint64_t width) { batchNorm(name, width); }
  void linear(const std::string& name, uint64_t in, uint64_t out) {
    add(name + ".weight", in * out);
    add(name + ".bias", out);
  }
};

void resnet50(Builder& b) {
  b.add("conv1.weight", 64 * 3 * 7 * 7);
  b.batchNorm("bn1", 64);
  const int blocks[] = {3, 4, 6, 3};
  uint64_t inplanes = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const uint64_t planes = uint64_t{64} << layer;
    for (int block = 0; block < blocks[layer]; ++block) {
      const std::string p = "layer" + std::to_string(layer + 1) + "." + std::to_string(block) + ".";
      b.add(p + "conv1.weight", planes * inplanes);
      b.batchNorm(p + "bn1", planes);
      b.add(p + "conv2.weight", planes * planes * 9);
      b.batchNorm(p + "bn2", planes);
      b.add(p + "conv3.weight", planes * 4 * planes);
      b.batchNorm(p + "bn3", planes * 4);
      if (block == 0) {
        b.add(p + "downsample.0.weight", planes * 4 * inplanes);
        b.batchNorm(p + "downsample.1", planes * 4);
      }
      inplanes = planes * 4;
    }
  }
  b.linear("fc", 2048, 1000);
}

void bertBase(Builder& b) {
  const uint64_t hidden = 768, inner = 3072;
  b.add("embeddings.word_embeddings.weight", 30522 * hidden);
  b.add("embeddings.position_embeddings.weight", 512 * hidden);
  b.add("embeddings.token_type_embeddings.weight", 2 * hidden);
  b.layerNorm("embeddings.LayerNorm", hidden);
  for (int layer = 0; layer < 12; ++layer) {
    const std::string p = "encoder.layer." + std::to_string(layer) + ".";
    b.linear(p + "attention.self.query", hidden, hidden);
    b.linear(p + "attention.self.key", hidden, hidden);
    b.linear(p + "attention.self.value", hidden, hidden);
    b.linear(p + "attention.output.dense", hidden, hidden);
    b.layerNorm(p + "attention.output.LayerNorm", hidden);
    b.linear(p + "intermediate.dense", hidden, inner);
    b.linear(p + "output.dense", inner, hidden);
    b.layerNorm(p + "output.LayerNorm", hidden);
  }
  b.linear("pooler.dense", hidden, hidden);
}

}  // namespace

StatusOr<std::vector<ModelTensor>> modelTensors(const std::string& model) {
  Builder b;
  if (model == "resnet50")
    resnet50(b);
  else if (model == "bert-base")
    bertBase(b);
  else
    return InvalidArgument("--model: '" + model + "' is not a known model (resnet50, bert-base)");
  const int n = static_cast<int>(b.forward.size());
  for (int i = 0; i < n; ++i) b.forward[i].priority = n - i;  // the first forward layer is needed first
  std::reverse(b.forward.begin(), b.forward.end());
  return b.forward;
}

}  // namespace zps
