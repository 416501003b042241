#include "deploy/graph_c_api.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "deploy/graph_module.h"

struct KilnGraph {
  kiln::deploy::GraphModule module;
};

namespace {

thread_local std::string last_error;

int32_t fail(const std::exception &e) {
  last_error = e.what();
  return 1;
}

bool in_range(int32_t index, size_t size) { return index >= 0 && static_cast<size_t>(index) < size; }

}  // namespace

extern "C" {

KilnGraph *kiln_graph_load(const char *path) {
  try {
    if (!path) throw kiln::UserError("kiln_graph_load: no path");
    return new KilnGraph{kiln::deploy::GraphModule::load(path)};
  } catch (const std::exception &e) {
    fail(e);
    return nullptr;
  }
}

void kiln_graph_free(KilnGraph *g) { delete g; }

const char *kiln_graph_last_error(void) { return last_error.c_str(); }

int32_t kiln_graph_num_inputs(const KilnGraph *g) { return g ? static_cast<int32_t>(g->module.inputs().size()) : 0; }
int32_t kiln_graph_num_outputs(const KilnGraph *g) { return g ? static_cast<int32_t>(g->module.outputs().size()) : 0; }

const char *kiln_graph_input_name(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.inputs().size()) ? g->module.inputs()[static_cast<size_t>(index)].name.c_str()
                                                         : nullptr;
}
const char *kiln_graph_output_name(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.outputs().size()) ? g->module.outputs()[static_cast<size_t>(index)].name.c_str()
                                                          : nullptr;
}

int32_t kiln_graph_input_index(const KilnGraph *g, const char *name) {
  if (!g || !name) return -1;
  const auto &in = g->module.inputs();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

int32_t kiln_graph_input_ndim(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.inputs().size())
             ? static_cast<int32_t>(g->module.inputs()[static_cast<size_t>(index)].shape.size())
             : -1;
}
const int64_t *kiln_graph_input_shape(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.inputs().size()) ? g->module.inputs()[static_cast<size_t>(index)].shape.data()
                                                         : nullptr;
}
int32_t kiln_graph_output_ndim(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.outputs().size())
             ? static_cast<int32_t>(g->module.outputs()[static_cast<size_t>(index)].shape.size())
             : -1;
}
const int64_t *kiln_graph_output_shape(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.outputs().size()) ? g->module.outputs()[static_cast<size_t>(index)].shape.data()
                                                          : nullptr;
}

int32_t kiln_graph_input_dtype(const KilnGraph *g, int32_t index, uint8_t *dtype_code, uint8_t *dtype_bits) {
  if (!g || !in_range(index, g->module.inputs().size())) return 1;
  const kiln::deploy::DType d = g->module.inputs()[static_cast<size_t>(index)].dtype;
  if (dtype_code) *dtype_code = static_cast<uint8_t>(d.code);
  if (dtype_bits) *dtype_bits = d.bits;
  return 0;
}

int32_t kiln_graph_output_dtype(const KilnGraph *g, int32_t index, uint8_t *dtype_code, uint8_t *dtype_bits) {
  if (!g || !in_range(index, g->module.outputs().size())) return 1;
  const kiln::deploy::DType d = g->module.outputs()[static_cast<size_t>(index)].dtype;
  if (dtype_code) *dtype_code = static_cast<uint8_t>(d.code);
  if (dtype_bits) *dtype_bits = d.bits;
  return 0;
}

int32_t kiln_graph_set_input(KilnGraph *g, int32_t index, const void *data, const int64_t *shape, int32_t ndim,
                             uint8_t dtype_code, uint8_t dtype_bits) {
  try {
    if (!g) throw kiln::UserError("kiln_graph_set_input: no model");
    if (ndim < 0 || (ndim > 0 && !shape)) throw kiln::UserError("kiln_graph_set_input: no shape");
    kiln::deploy::DType dtype;
    dtype.code = static_cast<kiln::deploy::DType::Code>(dtype_code);
    dtype.bits = dtype_bits;
    g->module.set_input(index, data, std::vector<int64_t>(shape, shape + ndim), dtype);
    return 0;
  } catch (const std::exception &e) {
    return fail(e);
  }
}

int32_t kiln_graph_run(KilnGraph *g) {
  try {
    if (!g) throw kiln::UserError("kiln_graph_run: no model");
    g->module.run();
    return 0;
  } catch (const std::exception &e) {
    return fail(e);
  }
}

int32_t kiln_graph_num_steps(const KilnGraph *g) { return g ? static_cast<int32_t>(g->module.steps().size()) : 0; }

const char *kiln_graph_step_kernel(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.steps().size()) ? g->module.steps()[static_cast<size_t>(index)].kernel.c_str()
                                                        : nullptr;
}
const char *kiln_graph_step_node(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.steps().size()) ? g->module.steps()[static_cast<size_t>(index)].node.c_str()
                                                        : nullptr;
}
const char *kiln_graph_step_op(const KilnGraph *g, int32_t index) {
  return g && in_range(index, g->module.steps().size()) ? g->module.steps()[static_cast<size_t>(index)].op.c_str()
                                                        : nullptr;
}

int32_t kiln_graph_run_profiled(KilnGraph *g, double *seconds) {
  try {
    if (!g) throw kiln::UserError("kiln_graph_run_profiled: no model");
    if (!seconds) throw kiln::UserError("kiln_graph_run_profiled: no array for the step times");
    const std::vector<double> t = g->module.run_profiled();
    std::copy(t.begin(), t.end(), seconds);
    return 0;
  } catch (const std::exception &e) {
    return fail(e);
  }
}

const void *kiln_graph_output_data(const KilnGraph *g, int32_t index) {
  if (!g || !in_range(index, g->module.outputs().size())) return nullptr;
  return g->module.output_data(index);
}

}  // extern "C"
