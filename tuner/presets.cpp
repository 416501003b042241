#include "tuner/presets.h"

#include <cstdint>

namespace kiln::tuner {

namespace {

using contracts::Json;

Json tensor(const std::vector<int64_t> &shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

TuneTask conv(const std::string &name, int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t pad,
              double weight) {
  return {"conv2d_nchwc.x86",
          Json::object({{"data", tensor({1, c, hw, hw})},
                        {"kernel", tensor({oc, c, k, k})},
                        {"strides", Json::array_of(std::vector<int64_t>{stride, stride})},
                        {"padding", Json::array_of(std::vector<int64_t>{pad, pad, pad, pad})},
                        {"dilation", Json::array_of(std::vector<int64_t>{1, 1})}}),
          weight, name};
}

TuneTask dense(const std::string &name, int64_t m, int64_t n, int64_t k, double weight) {
  return {"dense_pack.x86", Json::object({{"data", tensor({m, k})}, {"weight", tensor({n, k})}, {"prepacked", true}}),
          weight, name};
}

std::vector<TuneTask> resnet18() {
  return {
      conv("conv1 7x7/2 3->64", 3, 224, 64, 7, 2, 3, 1),       conv("layer1 3x3 64", 64, 56, 64, 3, 1, 1, 4),
      conv("layer2 3x3/2 64->128", 64, 56, 128, 3, 2, 1, 1),   conv("layer2 1x1/2 64->128", 64, 56, 128, 1, 2, 0, 1),
      conv("layer2 3x3 128", 128, 28, 128, 3, 1, 1, 3),        conv("layer3 3x3/2 128->256", 128, 28, 256, 3, 2, 1, 1),
      conv("layer3 1x1/2 128->256", 128, 28, 256, 1, 2, 0, 1), conv("layer3 3x3 256", 256, 14, 256, 3, 1, 1, 3),
      conv("layer4 3x3/2 256->512", 256, 14, 512, 3, 2, 1, 1), conv("layer4 1x1/2 256->512", 256, 14, 512, 1, 2, 0, 1),
      conv("layer4 3x3 512", 512, 7, 512, 3, 1, 1, 3),         dense("fc 512->1000", 1, 1000, 512, 1),
  };
}

std::vector<TuneTask> bert_base() {
  const int64_t seq = 128, hidden = 768, heads = 12, head = 64, ffn = 3072;
  return {
      dense("qkv projection", seq, 3 * hidden, hidden, 1),
      dense("attention output", seq, hidden, hidden, 1),
      dense("ffn up", seq, ffn, hidden, 1),
      dense("ffn down", seq, hidden, ffn, 1),
      {"batch_matmul.x86", Json::object({{"a", tensor({heads, seq, head})}, {"b", tensor({heads, seq, head})}}), 1,
       "attention scores"},
      {"batch_matmul.x86", Json::object({{"a", tensor({heads, seq, seq})}, {"b", tensor({heads, head, seq})}}), 1,
       "attention context"},
      {"softmax.x86", Json::object({{"data", tensor({heads, seq, seq})}}), 1, "softmax"},
      {"layer_norm.x86", Json::object({{"data", tensor({seq, hidden})}}), 2, "layer norm"},
  };
}

}  // namespace

std::vector<std::string> preset_names() { return {"resnet18", "bert-base"}; }

std::vector<TuneTask> preset_tasks(const std::string &name) {
  if (name == "resnet18") return resnet18();
  if (name == "bert-base") return bert_base();
  throw TuneError("unknown preset '" + name + "'; the presets are resnet18 and bert-base");
}

}  // namespace kiln::tuner
