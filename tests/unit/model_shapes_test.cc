// Tests for the model shapes of `zps bench --model` (tools/bench/model_shapes.h): the published
// parameter counts, backward order, and priorities that put the first forward layer first.
#include <catch2/catch.hpp>
#include <cstdint>

#include "tools/bench/model_shapes.h"

namespace zps {
namespace {

uint64_t totalElements(const std::vector<ModelTensor>& tensors) {
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.elements;
  return total;
}

TEST_CASE("model shapes: resnet50 and bert-base have their published parameter counts") {
  auto resnet = modelTensors("resnet50");
  REQUIRE(resnet.ok());
  CHECK(resnet->size() == 161);
  CHECK(totalElements(*resnet) == 25557032);  // torchvision resnet50
  auto bert = modelTensors("bert-base");
  REQUIRE(bert.ok());
  CHECK(bert->size() == 199);
  CHECK(totalElements(*bert) == 109482240);  // bert-base-uncased without heads
}

TEST_CASE("model shapes: backward order, and the first forward layer has the highest priority") {
  auto resnet = modelTensors("resnet50");
  REQUIRE(resnet.ok());
  CHECK(resnet->front().name == "fc.bias");
  CHECK(resnet->back().name == "conv1.weight");
  for (size_t i = 1; i < resnet->size(); ++i) CHECK((*resnet)[i].priority > (*resnet)[i - 1].priority);
  CHECK(modelTensors("vgg16").status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zps
