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

// An input of the wrong shape or dtype, an unknown input name, an index out of range (the message
// names the input); a profile of fewer than 1 run.
class GraphInputError : public UserError {
 public:
  using UserError::UserError;
};

struct GraphIo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// One kernel call of a run, in run order: the kernel it calls and the graph node it computes (as
// the artifact's graph records them; views and in-place concats call no kernel and have no step).
struct GraphStep {
  std::string kernel;  // the library's function, e.g. "kiln_k3" (steps of one signature share one)
  std::string node;    // the graph node's name
  std::string op;      // the node's op, e.g. "ConvNCHWc"
};

// True when the file at `path` starts with the artifact magic (whatever its extension).
bool is_artifact(const std::string &path);

class GraphModule;

// Where a run's time goes: `runs` profiled runs (GraphModule::run_profiled) interleaved with as
// many plain runs, after a warm-up.
struct RunProfile {
  int runs = 0, warmup = 0;
  std::vector<double> step_ms;     // each step's median over the profiled runs, in step order
  std::vector<double> typical_ms;  // the steps of the profiled run whose sum is the median
  double steps_ms = 0;             // the median over the profiled runs of a run's steps' sum
  double run_ms = 0;               // the median of the plain runs (run(), timed as a whole)
};

// Profiles `m`'s runs on its current inputs; `runs` is at least 1 (else GraphInputError).
RunProfile profile_runs(GraphModule &m, int runs);

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

  // The kernel calls of a run, in order.
  const std::vector<GraphStep> &steps() const;
  // Runs every step as run() does and returns each step's wall time in seconds, one per entry of
  // steps(). run() itself reads no clock.
  std::vector<double> run_profiled();

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
