#pragma once
// `kiln run MODEL --input x=in.npy --output-dir out/`: runs an ONNX model through the reference
// executor, or a compiled model (`model.kiln`, recognised by its magic) through the deploy runtime,
// and writes each output as .npy; `--bench N` times N runs. `kiln compile MODEL -o model.kiln`:
// optimizes and compiles an ONNX model into one deployable file. `kiln inspect MODEL`: the model's
// inputs, outputs, op counts, parameters, FLOPs and unsupported ops.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::driver {
struct ExtractedTask;
}

namespace kiln::cli {

void add_model_commands(CLI::App &app);

// An --input-shape: NAME=DIMS, positive dimensions separated by ',' or 'x' (1,3,224,224 or
// 1x3x224x224), or NAME=scalar. Throws UserError showing the form.
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string &text);

// What a tuning task computes, in a few words: its tensor arguments' shapes (data and weights,
// "1x64x56x56 * 64x64x3x3"), and a convolution's strides where they are not 1.
std::string task_summary(const driver::ExtractedTask &task);

}  // namespace kiln::cli
