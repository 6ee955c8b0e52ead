// The trainable tensors of real models, for `zps bench --model`: a round of a data-parallel training
// step pushes one gradient per tensor, in backward order (the last layer's gradients are ready first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zps/status.h"

namespace zps {

struct ModelTensor {
  std::string name;
  uint64_t elements;  // float32 elements
  // Higher = needed sooner by the next forward pass (BytePS's convention: the first layer is highest).
  int priority;
};

// "resnet50" (torchvision ResNet-50: 161 tensors, 25,557,032 parameters) or "bert-base" (BERT-base
// uncased without heads: 199 tensors, 109,482,240 parameters), listed in backward order.
StatusOr<std::vector<ModelTensor>> modelTensors(const std::string& model);

}  // namespace zps
