#pragma once
// Built-in task lists: the distinct operators of a known network with how often each occurs, so
// that `kiln tune --preset resnet18` tunes what a deployment of that network runs.
//   resnet18    ResNet-18 at batch 1, 224x224, NCHWc convolutions (12 distinct layers: the 7x7
//               stem, the 3x3 and 1x1 layers of the four stages) and the classifier (dense 512 to
//               1000)
//   bert-base   one encoder layer of BERT-base at sequence length 128, batch 1: the fused QKV
//               projection, the attention output projection, the two feed-forward layers, the two
//               attention batch matmuls, softmax and layer norm
#include <string>
#include <vector>

#include "tuner/tuner.h"

namespace kiln::tuner {

std::vector<std::string> preset_names();
// Throws TuneError naming the presets for an unknown name.
std::vector<TuneTask> preset_tasks(const std::string &name);

}  // namespace kiln::tuner
