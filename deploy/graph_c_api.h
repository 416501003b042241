/* The C API of the Kiln runtime for compiled models (`model.kiln`, see deploy/graph_module.h).
 * Plain C99; link kiln_deploy.
 *
 *   KilnGraph *g = kiln_graph_load("model.kiln");
 *   if (!g) { fprintf(stderr, "%s\n", kiln_graph_last_error()); return 1; }
 *   kiln_graph_set_input(g, 0, data, shape, 4, kKilnFloat, 32);
 *   kiln_graph_run(g);
 *   const float *y = kiln_graph_output_data(g, 0);
 *   kiln_graph_free(g);
 *
 * Functions that can fail return NULL or a nonzero status; kiln_graph_last_error() then says why
 * (it is per thread and stays valid until the thread's next failing call). */
#ifndef KILN_DEPLOY_GRAPH_C_API_H_
#define KILN_DEPLOY_GRAPH_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct KilnGraph KilnGraph;

/* Loads a compiled model; NULL on failure (a missing, corrupt, truncated or foreign file). */
KilnGraph *kiln_graph_load(const char *path);
void kiln_graph_free(KilnGraph *g);
/* The message of this thread's latest failure ("" if none). */
const char *kiln_graph_last_error(void);

int32_t kiln_graph_num_inputs(const KilnGraph *g);
int32_t kiln_graph_num_outputs(const KilnGraph *g);
/* NULL for an index out of range. */
const char *kiln_graph_input_name(const KilnGraph *g, int32_t index);
const char *kiln_graph_output_name(const KilnGraph *g, int32_t index);
/* The index of the input called `name`, or -1. */
int32_t kiln_graph_input_index(const KilnGraph *g, const char *name);
/* The rank of input/output `index` (-1 for an index out of range) and its extents. */
int32_t kiln_graph_input_ndim(const KilnGraph *g, int32_t index);
const int64_t *kiln_graph_input_shape(const KilnGraph *g, int32_t index);
int32_t kiln_graph_output_ndim(const KilnGraph *g, int32_t index);
const int64_t *kiln_graph_output_shape(const KilnGraph *g, int32_t index);

/* The element type of input/output `index` (see KilnDTypeCode); 0, or nonzero for an index out of
 * range. */
int32_t kiln_graph_input_dtype(const KilnGraph *g, int32_t index, uint8_t *dtype_code, uint8_t *dtype_bits);
int32_t kiln_graph_output_dtype(const KilnGraph *g, int32_t index, uint8_t *dtype_code, uint8_t *dtype_bits);

/* Copies row-major `data` of `shape` (ndim extents) and dtype (code, bits: see KilnDTypeCode)
 * into input `index`. Returns 0, or nonzero when the shape or dtype differs from the input's (the
 * error names the input). */
int32_t kiln_graph_set_input(KilnGraph *g, int32_t index, const void *data, const int64_t *shape, int32_t ndim,
                             uint8_t dtype_code, uint8_t dtype_bits);
/* Runs the model; 0 or nonzero. */
int32_t kiln_graph_run(KilnGraph *g);
/* The kernel calls of a run, in order: their count, and step `index`'s kernel function, graph node
 * and op (NULL for an index out of range). */
int32_t kiln_graph_num_steps(const KilnGraph *g);
const char *kiln_graph_step_kernel(const KilnGraph *g, int32_t index);
const char *kiln_graph_step_node(const KilnGraph *g, int32_t index);
const char *kiln_graph_step_op(const KilnGraph *g, int32_t index);
/* Runs the model as kiln_graph_run does and writes each step's wall time in seconds to
 * `seconds[0 .. kiln_graph_num_steps(g))`; 0 or nonzero. */
int32_t kiln_graph_run_profiled(KilnGraph *g, double *seconds);
/* Output `index`'s data after a run, valid until the next run or kiln_graph_free; NULL for an index
 * out of range. */
const void *kiln_graph_output_data(const KilnGraph *g, int32_t index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_DEPLOY_GRAPH_C_API_H_ */
