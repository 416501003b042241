#pragma once
// `kiln run MODEL --input x=in.npy --output-dir out/`: imports an ONNX model, runs it through the
// reference executor and writes each output as .npy. `kiln inspect MODEL`: the model's inputs,
// outputs, op counts, parameters, FLOPs and unsupported ops.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_model_commands(CLI::App &app);

}  // namespace kiln::cli
