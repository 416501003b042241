#pragma once
// GraphModule: a compiled model (`model.kiln`, written by the graph compiler) loaded for running.
// The file holds the kernels as one shared library, the graph as JSON (values, kernel steps,
// inputs and outputs), the parameters and a static memory plan: every tensor the run writes has an
// offset in one arena, allocated once at load. See deploy/artifact_format.h and docs/graph.md.
//
//   deploy::GraphModule m = deploy::GraphModule::load("model.kiln");
//   m.set_input("x", x);
//   m.run();
//   deploy::Tensor y = m.get_output(0);
#include <memory>
#include <string>
#include <vector>

#include "deploy/module.h"
#include "deploy/tensor.h"

namespace kiln::deploy {

// A file that is not a Kiln artifact, one of another format version, or one that is truncated or
// corrupt. The message names the file and what is wrong.
class ArtifactError : public ModuleError {
 public:
  using ModuleError::ModuleError;
};

// An input of the wrong shape or dtype, an unknown input name, an index out of range. The message
// names the input.
class GraphInputError : public UserError {
 public:
  using UserError::UserError;
};

struct GraphIo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// True when the file at `path` starts with the artifact magic (whatever its extension).
bool is_artifact(const std::string &path);

class GraphModule {
 public:
  // Reads and checks the file (magic, version, sizes, checksum), loads its library and allocates
  // the arena. Throws ArtifactError.
  static GraphModule load(const std::string &path);

  GraphModule(GraphModule &&) noexcept;
  GraphModule &operator=(GraphModule &&) noexcept;
  ~GraphModule();

  const std::vector<GraphIo> &inputs() const;
  const std::vector<GraphIo> &outputs() const;
  std::string target() const;
  // The input's index by name; throws GraphInputError naming the model's inputs.
  int input_index(const std::string &name) const;

  // Copies `t` into input `index` (or `name`). Throws GraphInputError when its dtype or shape
  // differs from the input's.
  void set_input(int index, const Tensor &t);
  void set_input(const std::string &name, const Tensor &t);
  // The same from raw row-major data.
  void set_input(int index, const void *data, const std::vector<int64_t> &shape, DType dtype);

  // Runs every step. Throws KernelError when a kernel fails.
  void run();

  // A copy of output `i` after run().
  Tensor get_output(int i) const;
  // Output `i`'s bytes in the arena, valid until the next run() or the module's end.
  const void *output_data(int i) const;

  // The arena's size (the planned peak) and the parameters' size, in bytes.
  int64_t arena_bytes() const;
  int64_t params_bytes() const;

 private:
  struct State;
  explicit GraphModule(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::deploy
