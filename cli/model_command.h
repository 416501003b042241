#pragma once
// `kiln run MODEL --input x=in.npy --output-dir out/`: runs an ONNX model through the reference
// executor, or a compiled model (`model.kiln`, recognised by its magic) through the deploy runtime,
// and writes each output as .npy; `--bench N` times N runs. `kiln compile MODEL -o model.kiln`:
// optimizes and compiles an ONNX model into one deployable file. `kiln inspect MODEL`: the model's
// inputs, outputs, op counts, parameters, FLOPs and unsupported ops.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_model_commands(CLI::App &app);

}  // namespace kiln::cli
